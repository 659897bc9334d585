package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestMain runs `idemkit dev --conformance-seams` in the test process, with
// no restart supervisor (devsuper.go), so its in-process tests serve it.
// Up to four parallel tests run at once: they are conform runs, which
// mostly wait out their scenarios' deliberate delays.
func TestMain(m *testing.M) {
	if os.Getenv(envRunAsCLI) == "1" { // the test binary as the idemkit binary (runAsCLI)
		main()
	}
	os.Setenv(envSupervised, "0")
	testutil.WaitingParallel(4)
	dynamotest.Main(m)
}

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
	// A table that does not exist at the endpoint: the message names it
	// and says how to create it, not only the SDK's ResourceNotFoundException.
	errb.Reset()
	if code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--endpoint", e.Endpoint, "--table", prefix + "NoSuchTable"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `table "`+prefix+`NoSuchTable" does not exist`) || !strings.Contains(errb.String(), "idemkit tables create") {
		t.Fatalf("missing table: exit %d: %s", code, errb.String())
	}
	for _, bad := range []string{"tenantId=x", "worker", "worker="} {
		errb.Reset()
		if code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--attr", bad, "--endpoint", e.Endpoint}, &out, &errb); code != 2 {
			t.Fatalf("--attr %s: exit %d", bad, code)
		}
	}
}

// TestHelpCommand: "idemkit help COMMAND [SUBCOMMAND]" prints what
// "COMMAND [SUBCOMMAND] -h" prints, on stdout with exit 0; help for an
// unknown command is a usage error.
func TestHelpCommand(t *testing.T) {
	for _, c := range [][]string{{"dev"}, {"tables"}, {"tables", "create"}, {"apikey", "create"}, {"effects", "show"}} {
		var want, wantErr, got, gotErr bytes.Buffer
		wc := run(context.Background(), append(slices.Clone(c), "-h"), &want, &wantErr)
		gc := run(context.Background(), append([]string{"help"}, c...), &got, &gotErr)
		if wc != 0 || gc != 0 || got.String() != want.String() || got.Len() == 0 || gotErr.Len() != 0 {
			t.Errorf("idemkit help %v: exit %d, %d bytes (stderr %q); %v -h: exit %d, %d bytes", c, gc, got.Len(), gotErr.String(), c, wc, want.Len())
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help", "nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "nope"`) {
		t.Errorf("idemkit help nope: exit %d, stderr %q", code, errb.String())
	}
}
