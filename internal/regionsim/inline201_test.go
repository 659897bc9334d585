package regionsim_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/ids"
	"github.com/idemkit/idemkit/internal/itemsize"
)

// TestRunNamingAnswersAreStoredInline: the conflict auditor reads the run
// a Layer-1 record names from the stream image of the record item alone
// (idem/dynamostore.DecodeItem), which holds the response only when it is
// stored inline; a response stored in chunk items beside the record would
// read as naming no run, and its key would keep the global table's
// last-writer-wins. So every 201 that names a run (createRun, a retry, a
// fork) must be stored inline whatever the request: here with the longest
// inputs the deployed api accepts, which the answer repeats (a tenant of
// "anon:" and 128 characters, the longest a credential that mints run ids
// carries; a 253-character API domain; a 128-character
// Idempotency-Key; the credential parts the commerce and ERP policies
// scope by, which the record keeps only as a hash), poorly compressible,
// under every policy. The largest record item is 870 bytes of the 1024
// a record keeps inline (ERP's fork).
func TestRunNamingAnswersAreStoredInline(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	for _, policy := range idem.PolicyNames() {
		t.Run(policy, func(t *testing.T) { runNamingAnswersInline(t, e, policy) })
	}
}

func runNamingAnswersInline(t *testing.T, e *dynamotest.Emulator, policy string) {
	idemTable, runsTable, effectsTable := e.CreateTable(t, "IdempotencyTable"), e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable")
	env, err := settings.LoadEnv(func(k string) string {
		return map[string]string{settings.EnvCrossRegion: settings.CrossRegionReconciled,
			"IDEMPOTENCY_TABLE": idemTable, settings.EnvRunsTable: runsTable, settings.EnvEffectsTable: effectsTable, idemenv.Policy: policy}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(), Parts: kit.Parts{Runs: true, Guard: true, Ledger: true},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := apifn.New(apifn.ConfigFromKit(k))
	if err != nil {
		t.Fatal(err)
	}
	g := &xorshift{2463534242}
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
	tenant := "anon:" + g.text(128, alnum)
	domain := g.text(63, alnum[:62]) + "." + g.text(63, alnum[:62]) + "." + g.text(63, alnum[:62]) + "." + g.text(61, alnum[:62])
	if !ids.MintableTenant(tenant) || len(domain) != 253 {
		t.Fatalf("tenant %q mintable %v, domain of %d characters", tenant, ids.MintableTenant(tenant), len(domain))
	}
	src := runs.NewRun(tenant, "conformance-noop", json.RawMessage(`{}`), time.Now())
	if err := k.Runs.Create(ctx(t), src); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Runs.Transition(ctx(t), src.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, body string }{
		{"createRun", "/runs", `{"workflowId":"conformance-noop","inputs":{}}`},
		{"retry", "/runs/" + runs.ProjectID(src.ID) + "/retry", ""},
		{"fork", "/runs/" + runs.ProjectID(src.ID) + ":fork", `{"mode":"replay"}`},
	} {
		key := g.text(128, alnum) // every policy's key grammar
		ev := events.APIGatewayV2HTTPRequest{RawPath: c.path, Body: c.body, Headers: map[string]string{"content-type": "application/json", "idempotency-key": key}}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = http.MethodPost, c.path
		ev.RequestContext.DomainName, ev.RequestContext.RequestID = domain, "JKJaXmPLvHcESHA="
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": tenant,
			// the commerce and ERP policies' credential parts
			"namespace": g.text(300, alnum), "worker": g.text(300, alnum),
			"clientId": g.text(300, alnum), "companyId": g.text(300, alnum), "organizationId": g.text(300, alnum)}}
		resp, err := h.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			RunID string `json:"runId"`
		}
		if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(resp.Body), &b) != nil || b.RunID == "" {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, resp.Body)
		}
		out, err := e.Client().Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(idemTable), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, it := range out.Items {
			rec, err := idemdynamo.DecodeItem(it)
			if err != nil {
				t.Fatalf("%s: an item that is not a record (a chunk item?): %v", c.name, err)
			}
			if rec.State != idem.StateCompleted || rec.Response == nil {
				t.Fatalf("%s: a record %s without its response in the item (stored in chunks)", c.name, rec.State)
			}
			if strings.Contains(string(rec.Response.Body), `"runId":"`+b.RunID+`"`) {
				found = true
				t.Logf("%s: answer of %d bytes, record item of %d bytes, stored inline", c.name, len(resp.Body), itemsize.Of(it))
			}
		}
		if !found {
			t.Fatalf("%s: no record names %s", c.name, b.RunID)
		}
	}
}

type xorshift struct{ x uint32 }

// text is n pseudo-random characters of alphabet.
func (g *xorshift) text(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		g.x ^= g.x << 13
		g.x ^= g.x >> 17
		g.x ^= g.x << 5
		b[i] = alphabet[(g.x/2)%uint32(len(alphabet))]
	}
	return string(b)
}
