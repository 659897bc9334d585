package auditfn

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/emf"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func attempts(states ...string) types.AttributeValue {
	l := &types.AttributeValueMemberL{}
	for i, st := range states {
		l.Value = append(l.Value, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"n": n(string(rune('1' + i))), "state": s(st)}})
	}
	return l
}

func effect(state, attempt string, att types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s("effect#acme/x"), "sk": s("record"), "kind": s("effect"), "effectId": s("acme/x"),
		"state": s(state), "attempt": n(attempt), "attempts": att}
}

func idemRec(state, attempt string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s("caller:v1:abc"), "digest": s("d"), "state": s(state), "attempt": n(attempt)}
}

func TestAudit(t *testing.T) {
	var metrics, logs bytes.Buffer
	a := &Auditor{Metrics: emf.New(&metrics, "idemkit"), Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	recs := []stream.StreamRecord{
		// claim; fire; escaped + released; reclaim of a stalled (firing) claim
		{EventName: "INSERT", NewImage: effect("claimed", "1", attempts("claimed"))},
		{EventName: "MODIFY", OldImage: effect("claimed", "1", attempts("claimed")), NewImage: effect("firing", "1", attempts("claimed"))},
		{EventName: "MODIFY", OldImage: effect("firing", "1", attempts("claimed")), NewImage: effect("released", "1", attempts("escaped"))},
		{EventName: "MODIFY", OldImage: effect("released", "1", attempts("escaped")), NewImage: effect("claimed", "2", attempts("escaped", "claimed"))},
		{EventName: "MODIFY", OldImage: effect("firing", "2", attempts("escaped", "claimed")), NewImage: effect("claimed", "3", attempts("escaped", "escaped", "claimed"))},
		// TTL deletions: of an unfinished claim (counted), of a completed record (not)
		{EventName: "REMOVE", PrincipalID: stream.TTLPrincipal, IdentityType: "Service", OldImage: effect("firing", "3", attempts("claimed"))},
		{EventName: "REMOVE", PrincipalID: stream.TTLPrincipal, OldImage: effect("completed", "3", attempts("completed"))},
		{EventName: "REMOVE", OldImage: effect("claimed", "1", attempts("claimed"))}, // a user delete
		// Layer 1: a reclaimed lease, a retryable-failure re-run, TTL of pending
		{EventName: "MODIFY", OldImage: idemRec("pending", "1"), NewImage: idemRec("pending", "2")},
		{EventName: "MODIFY", OldImage: idemRec("retryable-failure", "2"), NewImage: idemRec("pending", "3")},
		{EventName: "REMOVE", PrincipalID: stream.TTLPrincipal, OldImage: idemRec("pending", "3")},
		{EventName: "REMOVE", PrincipalID: stream.TTLPrincipal, OldImage: idemRec("completed", "1")},
	}
	c := a.Audit(context.Background(), recs)
	if c.Escaped[TableEffects] != 2 || c.Reclaims[TableEffects] != 1 || c.TTLExpiredPending[TableEffects] != 1 ||
		c.Reclaims[TableIdempotency] != 1 || c.TTLExpiredPending[TableIdempotency] != 1 {
		t.Fatalf("%+v", c)
	}
	// EMF: one line per metric and table, bounded dimensions only.
	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(metrics.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		aws := m["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		name := aws["Metrics"].([]any)[0].(map[string]any)["Name"].(string)
		got[name+"/"+m["table"].(string)] = m[name].(float64)
		if dims := aws["Dimensions"].([]any)[0].([]any); len(dims) != 1 || dims[0] != "table" {
			t.Fatalf("dimensions %v", dims)
		}
	}
	want := map[string]float64{MetricEscaped + "/effects": 2, MetricReclaims + "/effects": 1, MetricTTLPending + "/effects": 1,
		MetricReclaims + "/idempotency": 1, MetricTTLPending + "/idempotency": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if strings.Contains(logs.String(), "caller:v1:abc") {
		t.Fatal("a Layer-1 record id reached the logs unhashed")
	}
}

func TestHandleLambdaTTLPrincipal(t *testing.T) {
	var metrics bytes.Buffer
	a := &Auditor{Metrics: emf.New(&metrics, ""), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
		EventID: "1", EventName: "REMOVE",
		UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"},
		Change: events.DynamoDBStreamRecord{OldImage: map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute("caller:v1:x"), "state": events.NewStringAttribute("pending"), "attempt": events.NewNumberAttribute("1"),
		}},
	}}}
	if _, err := a.HandleLambda(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics.String(), MetricTTLPending) {
		t.Fatalf("metrics %s", metrics.String())
	}
}

// TestResolutionIsNotAReclaim: an operator's resolution of an escaped
// effect left firing (a row with its operator) raises the record's attempt
// from a holding state, as a reclaim does, but is none: it is not counted
// in the reclaims, nor logged as one.
func TestResolutionIsNotAReclaim(t *testing.T) {
	var metrics, logs bytes.Buffer
	a := &Auditor{Metrics: emf.New(&metrics, "idemkit"), Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	resolved := attempts("escaped", "escaped", "completed")
	last := resolved.(*types.AttributeValueMemberL).Value[2].(*types.AttributeValueMemberM)
	last.Value["operator"], last.Value["note"] = s("ops@acme"), s("charged once, per the provider console")
	c := a.Audit(context.Background(), []stream.StreamRecord{
		{EventName: "MODIFY", OldImage: effect("firing", "2", attempts("escaped", "claimed")), NewImage: effect("completed", "3", resolved)},
	})
	if c.Reclaims[TableEffects] != 0 || strings.Contains(logs.String(), "reclaimed") {
		t.Fatalf("a resolution counted as a reclaim: %+v\n%s", c, logs.String())
	}
	if !strings.Contains(logs.String(), "resolved by an operator") {
		t.Fatalf("the resolution is not logged:\n%s", logs.String())
	}
}
