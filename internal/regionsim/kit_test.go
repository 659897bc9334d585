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
// IDEMPOTENCY_TABLE_REGION = the home region eu): the api's Layer-1 records,
// the executor's effect records and its fencing tokens go to the home
// region's tables, and createRun does not try a cross-region transaction.
// The idempotency and fence tables exist ONLY in eu here, so a call to us's
// own region would fail: success proves the home routing. The effects table
// has a replica in both regions (nothing replicates here): the effect
// record is written in eu's, never in us's.
func TestKitFencedReplicaUsesHomeRegion(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	home, replica := e.InRegion(eu), e.InRegion(us)
	idemTable, fenceTable := home.CreateTable(t, "IdempotencyTable"), home.CreateTable(t, "FenceTable")
	runsTable, effectsTable := replica.CreateTable(t, "RunsTable"), home.CreateTable(t, "EffectsTable")
	sameTableIn(t, replica, "EffectsTable", effectsTable)
	env, err := settings.LoadEnv(func(k string) string {
		return map[string]string{
			settings.EnvCrossRegion: settings.CrossRegionFenced, "IDEMPOTENCY_TABLE": idemTable,
			settings.EnvIdempotencyTableRegion: eu, settings.EnvFenceTable: fenceTable, settings.EnvFenceTableRegion: eu,
			settings.EnvRunsTable: runsTable, settings.EnvEffectsTable: effectsTable, settings.EnvWebhookLoopback: "true",
			settings.EnvReplicationLagBound: "1500",
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
	if k.Runs.(*runs.DynamoRuns).Transactional {
		t.Fatal("createRun would try a transaction spanning the home and the replica region")
	}
	h, err := apifn.New(apifn.Config{Runs: k.Runs, Guard: k.Guard, Ledger: k.Witness, Webhook: env.Webhook,
		CrossRegion: env.CrossRegion, Logger: logger})
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
	if count(replica, runsTable) != 1 {
		t.Fatal("the run is not in the replica region's RunsTable")
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
	// The advertisement of this deployment.
	caps, err := env.CapabilitiesDoc()
	if err != nil {
		t.Fatal(err)
	}
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
