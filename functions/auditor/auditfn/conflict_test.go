package auditfn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// toLambdaAV converts an SDK attribute value to the Lambda event type.
func toLambdaAV(t testing.TB, v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, 0, len(v.Value))
		for _, e := range v.Value {
			l = append(l, toLambdaAV(t, e))
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(toLambdaMap(t, v.Value))
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	}
	t.Fatalf("attribute type %T", v)
	return events.DynamoDBAttributeValue{}
}

func toLambdaMap(t testing.TB, m map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = toLambdaAV(t, v)
	}
	return out
}

// lambdaEvent builds the event a DynamoDB event source mapping delivers and
// sends it through its JSON wire form (as the Lambda runtime does), so the
// handler decodes exactly what Lambda would give it.
func lambdaEvent(t testing.TB, recs ...events.DynamoDBEventRecord) events.DynamoDBEvent {
	for i := range recs {
		recs[i].EventID = fmt.Sprintf("%d", i+1)
		recs[i].EventSource = "aws:dynamodb"
		recs[i].EventVersion = "1.1"
		recs[i].Change.StreamViewType = "NEW_AND_OLD_IMAGES"
		recs[i].Change.SequenceNumber = fmt.Sprintf("%021d", i+1)
	}
	b, err := json.Marshal(events.DynamoDBEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func change(t testing.TB, name string, old, cur map[string]types.AttributeValue) events.DynamoDBEventRecord {
	keys := cur
	if keys == nil {
		keys = old
	}
	return events.DynamoDBEventRecord{EventName: name, AWSRegion: "eu-west-1", Change: events.DynamoDBStreamRecord{
		Keys:     toLambdaMap(t, map[string]types.AttributeValue{"pk": keys["pk"], "sk": keys["sk"]}),
		OldImage: toLambdaMap(t, old), NewImage: toLambdaMap(t, cur)}}
}

func encode(t testing.TB, r *ledger.Record) map[string]types.AttributeValue {
	av, err := ledgerdynamo.EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	return av
}

// emfLines returns the EMF lines for metric name.
func emfLines(t testing.TB, out string, name string) []map[string]any {
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m[name]; ok {
			got = append(got, m)
		}
	}
	return got
}

func TestNewFromEnv(t *testing.T) {
	for _, tc := range []struct {
		cross, region string
		audit, fail   bool
	}{
		{"", "eu-west-1", false, false},
		{"single-region", "", false, false},
		{"reconciled-records", "eu-west-1", true, false},
		{"fenced-effects", "us-east-1", true, false},
		{"fenced-effects", "", false, true},
		{"strict", "eu-west-1", false, true},
		{"last-writer-wins", "eu-west-1", false, true},
	} {
		env := map[string]string{"CROSS_REGION": tc.cross, EnvRegion: tc.region}
		a, err := NewFromEnv(func(k string) string { return env[k] }, nil, nil)
		if (err != nil) != tc.fail {
			t.Fatalf("%+v: err %v", tc, err)
		}
		if err == nil && (a.Conflicts != nil) != tc.audit {
			t.Fatalf("%+v: conflict audit on = %v", tc, a.Conflicts != nil)
		}
	}
}

// Two regions each won their local claim of one effect during a partition
// and both fired (reconciled-records); on healing us-east-1's later write
// overwrote eu-west-1's. The eu-west-1 stream delivers that overwrite to the
// auditor as an ordinary MODIFY, in a batch with legitimate changes and a run
// reference. Exactly one conflict event is recorded: winner, loser, strategy
// and an opaque effect reference, no content and no key; the metric has
// only bounded dimensions.
func TestHandleLambdaRecordsCrossRegionConflict(t *testing.T) {
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-7731"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	rec := func(owner string, created time.Time, st ledger.State, att ledger.AttemptState, out *ledger.Outcome) *ledger.Record {
		return &ledger.Record{Key: "effect#" + id.EffectID, Kind: identity.KindEffect, EffectID: id.EffectID, Tenant: "acme",
			Keying: id.Keying, ProviderKey: id.ProviderKey, State: st, Owner: owner, Attempt: 1,
			LeaseUntil: created.Add(time.Minute), CreatedAt: created, UpdatedAt: created.Add(5 * time.Millisecond),
			ExpiresAt: created.Add(ledger.MinRetention), Outcome: out,
			Attempts: []ledger.Attempt{{N: 1, State: att, At: created, Fired: true}}}
	}
	euOwner, usOwner := "owner-token-eu-1f2e3d", "owner-token-us-9a8b7c"
	euClaimed := rec(euOwner, t0, ledger.StateClaimed, ledger.AttemptClaimed, nil)
	euClaimed.Attempts[0].Fired = false
	euFiring := rec(euOwner, t0, ledger.StateFiring, ledger.AttemptClaimed, nil)
	usDone := rec(usOwner, t0.Add(2*time.Millisecond), ledger.StateCompleted, ledger.AttemptCompleted,
		&ledger.Outcome{OK: true, Value: []byte(`{"refund":"re_SECRET_CONTENT"}`)})
	runRef := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "effect#" + id.EffectID},
		"sk": &types.AttributeValueMemberS{Value: "run#acme/run-1"}, "runKey": &types.AttributeValueMemberS{Value: "acme/run-1"},
		"kind": &types.AttributeValueMemberS{Value: "runref"}}
	ev := lambdaEvent(t,
		change(t, "INSERT", nil, encode(t, euClaimed)),
		change(t, "MODIFY", encode(t, euClaimed), encode(t, euFiring)), // fire mark: legitimate
		change(t, "INSERT", nil, runRef),
		change(t, "MODIFY", encode(t, euFiring), encode(t, usDone)), // the LWW overwrite
	)

	run := func(cross string) (metrics, logs string) {
		var mb, lb bytes.Buffer
		env := map[string]string{"CROSS_REGION": cross, EnvRegion: "eu-west-1"}
		a, err := NewFromEnv(func(k string) string { return env[k] }, emf.New(&mb, "idemkit"), slog.New(slog.NewJSONHandler(&lb, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := a.HandleLambda(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("HandleLambda: %+v, %v", resp, err)
		}
		return mb.String(), lb.String()
	}

	for _, strategy := range []string{"reconciled-records", "fenced-effects"} {
		metrics, logs := run(strategy)
		lines := emfLines(t, metrics, conflictaudit.MetricConflicts)
		if len(lines) != 1 || lines[0][conflictaudit.MetricConflicts] != 1.0 {
			t.Fatalf("%s: conflict metric lines %v\n%s", strategy, lines, metrics)
		}
		m := lines[0]
		if m["strategy"] != strategy || m["kind"] != "effect" || m["region"] != "eu-west-1" {
			t.Fatalf("%s: dimensions %v", strategy, m)
		}
		dims := m["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"].([]any)[0].([]any)
		if len(dims) != 3 {
			t.Fatalf("dimensions %v: want exactly strategy, kind, region", dims)
		}
		var event map[string]any
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			var l map[string]any
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			if l["msg"] == "cross_region_conflict" {
				if event != nil {
					t.Fatal("two conflict events for one overwrite")
				}
				event = l
				for _, secret := range []string{id.EffectID, id.ProviderKey, euOwner, usOwner, "re_SECRET_CONTENT", "order-7731"} {
					if strings.Contains(line, secret) {
						t.Fatalf("conflict event leaks %q: %s", secret, line)
					}
				}
			}
		}
		if event == nil {
			t.Fatalf("no conflict event logged:\n%s", logs)
		}
		winner, loser := event["winner"].(map[string]any), event["loser"].(map[string]any)
		if event["strategy"] != strategy || event["region"] != "eu-west-1" || event["reason"] != "same-attempt-other-owner" ||
			event["effect"] == "" || winner["state"] != "completed" || loser["state"] != "firing" || loser["fireMarked"] != true ||
			winner["owner"] == loser["owner"] {
			t.Fatalf("event %v", event)
		}
	}
	// single-region: no conflict audit at all (one table cannot conflict).
	metrics, logs := run("single-region")
	if strings.Contains(metrics, conflictaudit.MetricConflicts) || strings.Contains(logs, "cross_region_conflict") {
		t.Fatalf("single-region audited a conflict:\n%s\n%s", metrics, logs)
	}
}

// The partition test driven through the auditor handler: the real ledger
// claims the same effect in two moto regions while the replicator is
// partitioned (reconciled-records: both fire, the provider deduplicates by
// the stable key); on healing every stream record each region's table
// carries is delivered, Lambda-shaped, to that region's auditor. Exactly one
// conflict is recorded, by the region whose claim was overwritten.
func TestHandleLambdaTwoRegionPartition(t *testing.T) {
	const eu, us = "eu-west-1", "us-east-1"
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	var metrics bytes.Buffer
	var mu sync.Mutex
	rec := emf.New(&metrics, "idemkit")
	regions := map[string]regionsim.Region{}
	auditors := map[string]*Auditor{}
	ledgers := map[string]*ledger.Ledger{}
	for _, r := range []string{eu, us} {
		er := e.InRegion(r)
		table := er.CreateTable(t, "EffectsTable")
		regions[r] = regionsim.Region{Name: r, DB: er.Client(), Streams: er.StreamsClient(), Table: table}
		env := map[string]string{"CROSS_REGION": "reconciled-records", EnvRegion: r}
		a, err := NewFromEnv(func(k string) string { return env[k] }, rec, slog.New(slog.NewJSONHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		auditors[r] = a
		st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: er.Client(), Table: table})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		ledgers[r] = l
	}
	var handlerErr error
	rep, err := regionsim.New(regionsim.Config{A: regions[eu], B: regions[us], KeyAttrs: []string{"pk", "sk"},
		Lag: 500 * time.Millisecond, Now: clock.Now,
		Timestamp: func(img map[string]types.AttributeValue) (int64, bool) {
			r, err := ledgerdynamo.DecodeRecord(img)
			if err != nil || r == nil {
				return 0, false
			}
			return r.UpdatedAt.UnixMilli(), true
		},
		OnChange: func(c regionsim.Change) {
			mu.Lock()
			defer mu.Unlock()
			if _, err := auditors[c.Region].HandleLambda(ctx, lambdaEvent(t, change(t, c.Event, c.Old, c.New))); err != nil {
				handlerErr = err
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	prov := ledgertest.NewProvider(t)
	call := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		return prov.Call(ctx, c.ProviderKey, "refund 10 EUR")
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-42"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id}

	rep.SetPartitioned(true)
	if _, err := ledgers[eu].Do(ctx, eff, call); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.Step(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Millisecond)
	if res, err := ledgers[us].Do(ctx, eff, call); err != nil || res.Replayed {
		t.Fatalf("us during the partition: %+v, %v (want a second local win)", res, err)
	}
	if _, err := rep.Step(ctx); err != nil {
		t.Fatal(err)
	}
	rep.SetPartitioned(false)
	clock.Advance(time.Second)
	if err := rep.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if handlerErr != nil {
		t.Fatal(handlerErr)
	}
	if prov.Requests() != 2 || prov.Effects() != 1 {
		t.Fatalf("provider requests=%d effects=%d: want 2 deduplicated to 1", prov.Requests(), prov.Effects())
	}
	lines := emfLines(t, metrics.String(), conflictaudit.MetricConflicts)
	if len(lines) != 1 || lines[0]["region"] != eu || lines[0]["strategy"] != string(fence.ReconciledRecords) {
		t.Fatalf("conflict metric lines %v, want one from %s", lines, eu)
	}
}
