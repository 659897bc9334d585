package regionsim_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// The deployable wiring of a replica-region (us) function under
// fenced-effects, from its environment as template.yaml sets it
// (CROSS_REGION=fenced-effects, FENCE_TABLE_REGION and
// IDEMPOTENCY_TABLE_REGION = RUNS_TABLE_REGION = the home region eu): the
// api's Layer-1 records and runs, the executor's effect records and its
// fencing tokens go to the home region's tables, and createRun writes its
// run in the record's transaction there.
// The idempotency, runs and fence tables exist ONLY in eu here, so a call to us's
// own region would fail: success proves the home routing. The effects table
// has a replica in both regions (nothing replicates here): the effect
// record is written in eu's, never in us's, and us's witness, which reads
// us's replica, shows it only once it is copied there. The api is built
// as its main builds it (apifn.ConfigFromKit), and the advertisement read
// is the one it serves.
func TestKitFencedReplicaUsesHomeRegion(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	home, replica := e.InRegion(eu), e.InRegion(us)
	idemTable, fenceTable := home.CreateTable(t, "IdempotencyTable"), home.CreateTable(t, "FenceTable")
	runsTable, effectsTable := home.CreateTable(t, "RunsTable"), home.CreateTable(t, "EffectsTable")
	sameTableIn(t, replica, "EffectsTable", effectsTable)
	env, err := settings.LoadEnv(func(k string) string {
		return map[string]string{
			settings.EnvCrossRegion: settings.CrossRegionFenced, "IDEMPOTENCY_TABLE": idemTable,
			settings.EnvIdempotencyTableRegion: eu, settings.EnvFenceTable: fenceTable, settings.EnvFenceTableRegion: eu,
			settings.EnvRunsTable: runsTable, settings.EnvRunsTableRegion: eu, settings.EnvEffectsTable: effectsTable,
			settings.EnvWebhookLoopback: "true", settings.EnvReplicationLagBound: "1500",
		}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	k, err := kit.NewKit(kit.Config{Env: env, Client: replica.Client(), Parts: kit.Parts{Runs: true, Guard: true, Ledger: true}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if !k.Runs.(*runs.DynamoRuns).Transactional {
		t.Fatal("createRun does not write its run in the record's transaction although both live in the home region")
	}
	h, err := apifn.New(apifn.ConfigFromKit(k)) // as the api function's main builds it
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	body := `{"workflowId":"webhook","inputs":{"url":"` + sink.URL + `/hook","payload":{"n":1}}}`
	post := func() events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/runs", Body: body,
			Headers: map[string]string{"content-type": "application/json", "idempotency-key": "9b2f6c1e-3d4a-4e5f-8a7b-6c5d4e3f2a1b"}}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = http.MethodPost, "/runs"
		ev.RequestContext.DomainName, ev.RequestContext.RequestID = "api.example.com", "req-1"
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
		resp, err := h.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := post()
	if first.StatusCode != http.StatusCreated {
		t.Fatalf("createRun in the replica region: %d %s", first.StatusCode, first.Body)
	}
	if again := post(); again.StatusCode != http.StatusCreated || again.Body != first.Body || !replayed(again.Headers) {
		t.Fatalf("replay: %d %s %v", again.StatusCode, again.Body, again.Headers)
	}
	count := func(em *dynamotest.Emulator, table string) int {
		out, err := em.Client().Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}
	if count(home, idemTable) == 0 {
		t.Fatal("no Layer-1 record in the home region")
	}
	if count(home, runsTable) != 1 {
		t.Fatal("the run is not in the home region's RunsTable")
	}

	// The executor's fire takes its token from the home region's FenceTable.
	var created struct{ RunID string }
	if err := json.Unmarshal([]byte(first.Body), &created); err != nil {
		t.Fatal(err)
	}
	run, err := k.Runs.Get(ctx(t), created.RunID)
	if err != nil {
		t.Fatal(err)
	}
	k.Webhook.Test.Clock = ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}
	if _, err := k.Webhook.Deliver(ctx(t), run); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	if calls.Load() != 1 || count(home, fenceTable) != 1 {
		t.Fatalf("provider calls %d, home fence items %d; want 1 and 1", calls.Load(), count(home, fenceTable))
	}
	if count(home, effectsTable) == 0 || count(replica, effectsTable) != 0 {
		t.Fatalf("effect records: %d in the home region's replica, %d in us's; want them in the home region's only", count(home, effectsTable), count(replica, effectsTable))
	}
	// The witness (GET /runs/{runId}/effects) reads this region's replica of
	// the effects table, the one read replicationLagBoundMs bounds: until
	// replication brings the home region's record, the replica region's
	// answer lacks the effect (for as long as the real lag, past the
	// declared bound during a partition); once it has arrived, it shows it.
	witnessRows := func() int {
		t.Helper()
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/runs/" + runs.ProjectID(created.RunID) + "/effects"}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = http.MethodGet, ev.RawPath
		ev.RequestContext.DomainName, ev.RequestContext.RequestID = "api.example.com", "req-witness"
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
		resp, err := h.Handle(context.Background(), ev)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("witness in the replica region: %d %s %v", resp.StatusCode, resp.Body, err)
		}
		var p struct {
			Effects []json.RawMessage `json:"effects"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
			t.Fatal(err)
		}
		return len(p.Effects)
	}
	if n := witnessRows(); n != 0 {
		t.Fatalf("the replica region's witness shows %d effects before its replica holds the record; it reads the local replica", n)
	}
	items, err := home.Client().Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(effectsTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items.Items { // replication, by hand
		if _, err := replica.Client().PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(effectsTable), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if n := witnessRows(); n != 1 {
		t.Fatalf("the replica region's witness shows %d effects once the record replicated; want 1", n)
	}
	// The advertisement of this deployment, as its api function serves it.
	disc := events.APIGatewayV2HTTPRequest{RawPath: "/.well-known/openwop"}
	disc.RequestContext.HTTP.Method, disc.RequestContext.HTTP.Path = http.MethodGet, disc.RawPath
	capsResp, err := h.Handle(context.Background(), disc)
	if err != nil || capsResp.StatusCode != http.StatusOK {
		t.Fatalf("GET /.well-known/openwop: %d %s %v", capsResp.StatusCode, capsResp.Body, err)
	}
	caps := []byte(capsResp.Body)
	var doc struct {
		Idempotency struct {
			CrossRegion string `json:"crossRegion"`
			MultiRegion struct {
				ReplicationLagBoundMs     int    `json:"replicationLagBoundMs"`
				PartitionRecoveryStrategy string `json:"partitionRecoveryStrategy"`
			} `json:"multiRegion"`
		} `json:"idempotency"`
	}
	if err := json.Unmarshal(caps, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Idempotency.CrossRegion != settings.CrossRegionFenced || doc.Idempotency.MultiRegion.ReplicationLagBoundMs != 1500 ||
		doc.Idempotency.MultiRegion.PartitionRecoveryStrategy != settings.PartitionRecoveryHomeRegionFence {
		t.Fatalf("capabilities: %s", caps)
	}
}

func replayed(h map[string]string) bool {
	for k, v := range h {
		if strings.EqualFold(k, "OpenWOP-Idempotent-Replay") && v == "true" {
			return true
		}
	}
	return false
}

// sameTableIn creates, in e's region, the table name shaped like the
// template's logicalID: a global table's replica, of the same name as the
// one another region holds. Deleted when the test ends.
func sameTableIn(t *testing.T, e *dynamotest.Emulator, logicalID, name string) {
	t.Helper()
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tables.CreateDef(ctx(t), e.Client(), defs[logicalID], name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
}

// fenced-effects advertises multiRegion, whose replicationLagBoundMs is a
// bound after which reads are visible in every region. A run is therefore
// owned by the home region as its Layer-1 record is: a replica region's
// api writes and reads runs in the home region's RunsTable
// (RUNS_TABLE_REGION), so GET /runs/{runId} answers the same run in both
// regions at once, whichever region created it, and createRun keeps its
// run/record transaction (both tables are in the home region). Here the
// runs table exists in the home region only.
func TestFencedRunsAreReadInEveryRegion(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	home, replica := e.InRegion(eu), e.InRegion(us)
	idemTable, fenceTable := home.CreateTable(t, "IdempotencyTable"), home.CreateTable(t, "FenceTable")
	runsTable, effectsTable := home.CreateTable(t, "RunsTable"), home.CreateTable(t, "EffectsTable")
	sameTableIn(t, replica, "EffectsTable", effectsTable)
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	api := func(em *dynamotest.Emulator, vars map[string]string) (*apifn.Handler, *kit.Kit) {
		t.Helper()
		base := map[string]string{
			settings.EnvCrossRegion: settings.CrossRegionFenced, "IDEMPOTENCY_TABLE": idemTable,
			settings.EnvFenceTable: fenceTable, settings.EnvFenceTableRegion: eu,
			settings.EnvRunsTable: runsTable, settings.EnvEffectsTable: effectsTable,
		}
		for k, v := range vars {
			base[k] = v
		}
		env, err := settings.LoadEnv(func(k string) string { return base[k] })
		if err != nil {
			t.Fatal(err)
		}
		k, err := kit.NewKit(kit.Config{Env: env, Client: em.Client(), Parts: kit.Parts{Runs: true, Guard: true, Ledger: true}, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		h, err := apifn.New(apifn.ConfigFromKit(k))
		if err != nil {
			t.Fatal(err)
		}
		return h, k
	}
	homeAPI, _ := api(home, nil)
	replicaAPI, rk := api(replica, map[string]string{settings.EnvRunsTableRegion: eu})
	if !rk.Runs.(*runs.DynamoRuns).Transactional {
		t.Fatal("the replica's createRun does not write its run in the record's transaction although both tables are in the home region")
	}
	call := func(h *apifn.Handler, method, path, key, body string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, Body: body, Headers: map[string]string{"content-type": "application/json"}}
		if key != "" {
			ev.Headers["idempotency-key"] = key
		}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, path
		ev.RequestContext.DomainName, ev.RequestContext.RequestID = "api.example.com", "req-"+key
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
		resp, err := h.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const body = `{"workflowId":"conformance-noop","inputs":{}}`
	for _, c := range []struct {
		name          string
		create, other *apifn.Handler
		key           string
	}{
		{"created in the replica region", replicaAPI, homeAPI, "5a1d0c7e-2b3f-4c8d-9e6f-7a8b9c0d1e2f"},
		{"created in the home region", homeAPI, replicaAPI, "6b2e1d8f-3c4a-4d9e-8f7a-8b9c0d1e2f3a"},
	} {
		created := call(c.create, http.MethodPost, "/runs", c.key, body)
		if created.StatusCode != http.StatusCreated {
			t.Fatalf("%s: createRun %d %s", c.name, created.StatusCode, created.Body)
		}
		var run struct {
			RunID string `json:"runId"`
		}
		if err := json.Unmarshal([]byte(created.Body), &run); err != nil || run.RunID == "" {
			t.Fatalf("%s: %s (%v)", c.name, created.Body, err)
		}
		for _, h := range []*apifn.Handler{c.create, c.other} {
			if got := call(h, http.MethodGet, "/runs/"+run.RunID, "", ""); got.StatusCode != http.StatusOK || !strings.Contains(got.Body, run.RunID) {
				t.Fatalf("%s: GET /runs/%s: %d %s; want the run in both regions", c.name, run.RunID, got.StatusCode, got.Body)
			}
		}
		if again := call(c.other, http.MethodPost, "/runs", c.key, body); again.StatusCode != http.StatusCreated || again.Body != created.Body || !replayed(again.Headers) {
			t.Fatalf("%s: replay in the other region: %d %s", c.name, again.StatusCode, again.Body)
		}
	}
}
