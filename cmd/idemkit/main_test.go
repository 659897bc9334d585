package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestDispatchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, 2}, {[]string{"nope"}, 2}, {[]string{"help"}, 0}, {[]string{"tables"}, 2}, {[]string{"tables", "drop"}, 2},
		{[]string{"tables", "create"}, 2}, {[]string{"apikey", "create"}, 2}, {[]string{"apikey", "create", "--tenant", "a b"}, 2},
		{[]string{"dev", "--api-key", "novalue"}, 2}, {[]string{"dev", "extra"}, 2}, {[]string{"dev", "-h"}, 0},
		{[]string{"dev", "--emulator", "cassandra"}, 2}, {[]string{"dev", "--emulator", "moto", "--dynamodb-endpoint", "http://127.0.0.1:9"}, 2},
	} {
		var out, errb bytes.Buffer
		if got := run(context.Background(), c.args, &out, &errb); got != c.code {
			t.Errorf("idemkit %v: exit %d, want %d (%s)", c.args, got, c.code, errb.String())
		}
	}
}

func TestTablesAndAPIKeyCreate(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("t%d-", time.Now().UnixNano())
	for i := 0; i < 2; i++ { // the second run keeps the existing tables
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"tables", "create", "--endpoint", e.Endpoint, "--prefix", prefix}, &out, &errb); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errb.String())
		}
		for _, id := range []string{"IdempotencyTable", "RunsTable", "EffectsTable", "FenceTable", "ApiKeysTable"} {
			if !strings.Contains(out.String(), id+"\t"+prefix+id) {
				t.Fatalf("output %q lacks %s", out.String(), id)
			}
		}
	}
	// --only idempotency: the idem library's table alone, nothing else.
	only := fmt.Sprintf("o%d-", time.Now().UnixNano())
	var oout, oerr bytes.Buffer
	if code := run(context.Background(), []string{"tables", "create", "--endpoint", e.Endpoint, "--prefix", only, "--only", "idempotency"}, &oout, &oerr); code != 0 {
		t.Fatalf("--only idempotency: exit %d: %s", code, oerr.String())
	}
	if oout.String() != "IdempotencyTable\t"+only+"IdempotencyTable\n" {
		t.Fatalf("--only idempotency printed %q", oout.String())
	}
	// Every page: the shared emulator holds the tables of every test.
	var made []string
	for p := dynamodb.NewListTablesPaginator(e.Client(), &dynamodb.ListTablesInput{}); p.HasMorePages(); {
		lt, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range lt.TableNames {
			if strings.HasPrefix(n, only) {
				made = append(made, n)
			}
		}
	}
	if fmt.Sprint(made) != "["+only+"IdempotencyTable]" {
		t.Fatalf("--only idempotency created %v", made)
	}
	oerr.Reset()
	if code := run(context.Background(), []string{"tables", "create", "--endpoint", e.Endpoint, "--only", "idempotency,ledger"}, &oout, &oerr); code != 2 ||
		!strings.Contains(oerr.String(), `unknown table "ledger" (one of idempotency, effects, runs, fence, api-keys)`) {
		t.Fatalf("unknown --only name: exit %d: %s", code, oerr.String())
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--endpoint", e.Endpoint, "--table", prefix + "ApiKeysTable"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	key := strings.TrimSpace(out.String())
	keys := &apikeys.DynamoKeys{Client: e.Client(), Table: prefix + "ApiKeysTable"}
	if tn, ok, err := keys.Tenant(context.Background(), apikeys.HashKey(key)); err != nil || !ok || tn != "acme" {
		t.Fatalf("key %q: %q %v %v", key, tn, ok, err)
	}
	// --attr gives the key credential attributes.
	out.Reset()
	if code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--attr", "namespace=shop", "--attr", "worker=checkout",
		"--endpoint", e.Endpoint, "--table", prefix + "ApiKeysTable"}, &out, &errb); code != 0 {
		t.Fatalf("--attr: exit %d: %s", code, errb.String())
	}
	if c, ok, err := keys.Credential(context.Background(), apikeys.HashKey(strings.TrimSpace(out.String()))); err != nil || !ok ||
		c.Attrs["namespace"] != "shop" || c.Attrs["worker"] != "checkout" || len(c.Attrs) != 2 {
		t.Fatalf("--attr key: %+v %v %v", c, ok, err)
	}
	for _, bad := range []string{"tenantId=x", "worker", "worker="} {
		errb.Reset()
		if code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--attr", bad, "--endpoint", e.Endpoint}, &out, &errb); code != 2 {
			t.Fatalf("--attr %s: exit %d", bad, code)
		}
	}
}

// TestGateway: the dev server's net/http <-> payload 2.0 translation runs
// the authorizer on the run routes only and keeps %2F inside a path id.
func TestGateway(t *testing.T) {
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	api, err := apifn.New(apifn.Config{Runs: runs.NewMemRuns(), Guard: g, Ledger: l, BaseURL: "http://dev"})
	if err != nil {
		t.Fatal(err)
	}
	keys := apikeys.NewMemKeys()
	_ = keys.PutKey(context.Background(), "k1", "acme")
	srv := httptest.NewServer(&gateway{api: api, auth: &authfn.Handler{Keys: keys, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}})
	defer srv.Close()
	do := func(method, path, auth, key, body string) (*http.Response, map[string]any) {
		return testutil.DoJSON(t, method, srv.URL+path, body,
			"Authorization", testutil.Bearer(auth), "Idempotency-Key", key, "Content-Type", "application/json")
	}
	if r, m := do("POST", "/runs", "", "", `{"workflowId":"conformance-noop"}`); r.StatusCode != 401 || m["error"] != "unauthenticated" {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
	if r, m := do("POST", "/runs", "wrong", "", `{"workflowId":"conformance-noop"}`); r.StatusCode != 401 || m["error"] != "unauthenticated" {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
	key := "gw-0123456789abcdefghijkl"
	r1, m1 := do("POST", "/runs", "k1", key, `{"workflowId":"conformance-noop"}`)
	r2, _ := do("POST", "/runs", "k1", key, `{"workflowId":"conformance-noop"}`)
	if r1.StatusCode != 201 || r2.Header.Get("OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("%d %v / %v", r1.StatusCode, m1, r2.Header)
	}
	id := m1["runId"].(string)
	if r, m := do("GET", "/runs/"+strings.Replace(id, "/", "%2F", 1), "k1", "", ""); r.StatusCode != 200 || m["runId"] != id {
		t.Fatalf("%%2F form: %d %v", r.StatusCode, m)
	}
	if r, m := do("DELETE", "/runs/"+strings.Replace(id, "/", "~2F", 1), "", "", ""); r.StatusCode != 405 || r.Header.Get("Allow") != "GET" || m["error"] != apifn.CodeMethodNotAllowed {
		t.Fatalf("405: %d %v", r.StatusCode, m)
	}
	if r, _ := do("GET", "/.well-known/openwop", "", "", ""); r.StatusCode != 200 {
		t.Fatalf("capabilities %d", r.StatusCode)
	}
	if r, m := do("GET", "/elsewhere", "", "", ""); r.StatusCode != 404 || m["error"] != "not_found" {
		t.Fatalf("404: %d %v", r.StatusCode, m)
	}
}
