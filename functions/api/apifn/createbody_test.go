package apifn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/runstest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestCreateRunBodyIsClosed: createRun refuses a body member outside the
// createRun and RunOptions fields with 400 validation_error naming it, and
// over-limit tags likewise; neither is cached (the same key then creates a
// run) and neither creates a run.
func TestCreateRunBodyIsClosed(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","zzz":1}`, "zzz"},
		{`{"workflowID":"conformance-noop"}`, "workflowID"},
		{`{"workflowId":"conformance-noop","tags":"one"}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":["a",null]}`, "tags"},
		{`{"workflowId":"conformance-noop","configurable":{"version":1,"budget":{"modelDeny":[null]}}}`, "configurable.budget.modelDeny"},
	} {
		r, m := f.do(t, ev("POST", "/runs", "acme", key1, c.body))
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != 400 || m["error"] != "validation_error" || d["field"] != c.field {
			t.Errorf("%s: %d %v, want 400 validation_error on %s", c.body, r.StatusCode, m, c.field)
		}
	}
	if f.runs.Len() != 0 {
		t.Fatalf("%d runs after the refusals", f.runs.Len())
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","tags":["a"],"metadata":{"k":"v"}}`)); r.StatusCode != 201 {
		t.Fatalf("the same key after the 400s: %d %v", r.StatusCode, m)
	}
}

// TestCreateRunRefusesConfigurable: each refusal of RunOptions.configurable
// at create (its shape: 400 validation_error; a provider this host does not
// advertise: 400; a credentialRef without BYOK: 403 credential_forbidden;
// a mockProvider: 403 mock_provider_forbidden), details.field naming the
// key, creates no run and is not cached: the same key then creates one.
func TestCreateRunRefusesConfigurable(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		configurable string
		status       int
		code, field  string
	}{
		{`{}`, 400, "validation_error", "configurable.version"},
		{`{"version":2}`, 400, "validation_error", "configurable.version"},
		{`{"version":1,"zzz":1}`, 400, "validation_error", "configurable.zzz"},
		{`{"version":1,"ai.provider":"x"}`, 400, "validation_error", "configurable.ai.provider"},
		{`{"version":1,"run":{"foo":1}}`, 400, "validation_error", "configurable.run.foo"},
		{`{"version":1,"run":{"runTimeoutMs":0}}`, 400, "validation_error", "configurable.run.runTimeoutMs"},
		{`{"version":1,"ai":{"provider":"openai"}}`, 400, "validation_error", "configurable.ai.provider"},
		{`{"version":1,"ai":{"credentialRef":"c"}}`, 403, "credential_forbidden", "configurable.ai.credentialRef"},
		{`{"version":1,"ai":{"mockProvider":{}}}`, 403, "mock_provider_forbidden", "configurable.ai.mockProvider"},
	} {
		r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","configurable":`+c.configurable+`}`))
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != c.status || m["error"] != c.code || d["field"] != c.field || m["message"] == "" {
			t.Errorf("%s: %d %v, want %d %s on %s", c.configurable, r.StatusCode, m, c.status, c.code, c.field)
		}
	}
	if f.runs.Len() != 0 {
		t.Fatalf("%d runs after the refusals", f.runs.Len())
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","configurable":{"version":1}}`)); r.StatusCode != 201 {
		t.Fatalf("the same key after the refusals: %d %v", r.StatusCode, m)
	}
}

// TestCreateRunPersistsRunOptions: configurable, tags and metadata are
// persisted on the run at creation and getRun's snapshot carries them
// unchanged (the values as sent, whitespace between tokens aside: numbers,
// escapes, key order and <&> kept), valid against the closed
// run-snapshot.schema.json; a replay of the create answers the first 201
// and creates nothing; a run created without them has none of the fields.
func TestCreateRunPersistsRunOptions(t *testing.T) {
	sch, _, err := wireschema.Load(t).Response("GET", "/runs/{runId}", 200)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	const (
		configurable = `{"version":1,"run":{"runTimeoutMs":60000,"escalationThreshold":0.50},"ai":{"model":"m","temperature":1e0},"extensions":{"acme":{"z":1,"a":null}}}`
		tags         = `["b","\u00e9t\u00e9","","b"]`
		metadata     = `{"z":[1,2.50,{"n":null}],"e":1e2,"s":"<&>","a":{}}`
	)
	body := `{"workflowId":"conformance-noop", "configurable": ` + configurable + `,` + "\n" + `"tags": ` + tags + `, "metadata": ` + metadata + `}`
	first, m := f.do(t, ev("POST", "/runs", "acme", key1, body))
	if first.StatusCode != 201 {
		t.Fatalf("create: %d %v", first.StatusCode, m)
	}
	id, _ := m["runId"].(string)
	if replay, _ := f.do(t, ev("POST", "/runs", "acme", key1, body)); replay.StatusCode != 201 || replay.Body != first.Body || f.runs.Len() != 1 {
		t.Fatalf("replay: %d %s, %d runs", replay.StatusCode, replay.Body, f.runs.Len())
	}
	r, _ := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id), "acme", "", ""))
	if r.StatusCode != 200 {
		t.Fatalf("getRun: %d %s", r.StatusCode, r.Body)
	}
	if err := wireschema.Validate(sch, []byte(r.Body)); err != nil {
		t.Fatalf("the snapshot against run-snapshot.schema.json: %v\n%s", err, r.Body)
	}
	for _, want := range []string{`"configurable":` + configurable, `"tags":` + tags, `"metadata":` + metadata} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("the snapshot lacks %s:\n%s", want, r.Body)
		}
	}
	if _, m := f.do(t, ev("POST", "/runs", "acme", "k-plain-0123456789abcdefghij", `{"workflowId":"conformance-noop"}`)); m["runId"] == nil {
		t.Fatalf("plain create: %v", m)
	} else {
		_, snap := f.do(t, ev("GET", "/runs/"+runs.ProjectID(m["runId"].(string)), "acme", "", ""))
		for _, k := range []string{"configurable", "tags", "metadata"} {
			if _, ok := snap[k]; ok {
				t.Errorf("a run created without RunOptions has %s on its snapshot: %v", k, snap)
			}
		}
	}
}

// TestLargestBodyFitsTheRunItem: the largest createRun body the host
// accepts (MaxBodyBytes; a larger one is 413 payload_too_large before
// anything is read or written) is no larger than the RunOptions the run
// store conformance suite proves a run item holds on the three engines
// (runstest.LargestBody).
func TestLargestBodyFitsTheRunItem(t *testing.T) {
	if MaxBodyBytes > runstest.LargestBody {
		t.Fatalf("MaxBodyBytes %d exceeds the %d bytes of RunOptions runstest proves a run item holds", MaxBodyBytes, runstest.LargestBody)
	}
	f := newFixture(t)
	pad := strings.Repeat("x", MaxBodyBytes-len(`{"workflowId":"conformance-noop","metadata":{"p":""}}`))
	if r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","metadata":{"p":"`+pad+`"}}`)); r.StatusCode != 201 {
		t.Fatalf("a body of MaxBodyBytes: %d %v", r.StatusCode, m)
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", "k-over-0123456789abcdefghij", `{"workflowId":"conformance-noop","metadata":{"p":"x`+pad+`"}}`)); r.StatusCode != 413 || m["error"] != "payload_too_large" || f.runs.Len() != 1 {
		t.Fatalf("a body one byte over: %d %v, %d runs", r.StatusCode, m, f.runs.Len())
	}
}

// TestRetryInheritsRunOptions: POST /runs/{runId}/retry starts a new run of
// the failed run's workflow and inputs under its RunOptions, which its
// snapshot carries unchanged.
func TestRetryInheritsRunOptions(t *testing.T) {
	f := newFixture(t)
	members := []string{`"configurable":{"version":1,"run":{"runTimeoutMs":5}}`, `"tags":["a"]`, `"metadata":{"k":[1.50]}`}
	opts := strings.Join(members, ",")
	r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop",`+opts+`}`))
	if r.StatusCode != 201 {
		t.Fatalf("create: %d %v", r.StatusCode, m)
	}
	id := m["runId"].(string)
	if _, err := f.runs.Transition(context.Background(), id, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", time.Now()); err != nil {
		t.Fatal(err)
	}
	r, m = f.do(t, ev("POST", "/runs/"+runs.ProjectID(id)+"/retry", "acme", "k-retry-0123456789abcdefghij", ""))
	if r.StatusCode != 201 {
		t.Fatalf("retry: %d %v", r.StatusCode, m)
	}
	snap, _ := f.do(t, ev("GET", "/runs/"+runs.ProjectID(m["runId"].(string)), "acme", "", ""))
	for _, want := range members {
		if !strings.Contains(snap.Body, want) {
			t.Errorf("the retry's snapshot lacks %s:\n%s", want, snap.Body)
		}
	}
}
