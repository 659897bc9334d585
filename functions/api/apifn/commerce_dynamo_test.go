package apifn

// The commerce policy on the reference host, on the emulators (RunsTable,
// its inbox and the Layer-1 table): failed runs retried by a new run,
// offline-queued cancels checked against the run's version, and the
// caller's inbox. Each test is named after the behaviour it proves.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

type commerceHost struct {
	f    *fixture
	runs *runs.DynamoRuns
	cnt  *dynamotest.Counter
}

// newCommerceHost is the api handler under the commerce policy on e:
// runs, inbox and idempotency records in the emulator's tables.
func newCommerceHost(t *testing.T, e *dynamotest.Emulator) *commerceHost {
	t.Helper()
	cnt := dynamotest.NewCounter()
	c := e.Client(dynamotest.FastRetries, cnt.Middleware())
	runs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
	st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
	if err != nil {
		t.Fatal(err)
	}
	return &commerceHost{f: hostOf(t, runs, idem.Config{Policy: commerce.Policy, Store: st}, nil), runs: runs, cnt: cnt}
}

// commerceReq is a request of acme's checkout worker in namespace shop (the
// credential's attributes, as the authorizer passes them).
func commerceReq(method, path, key string) events.APIGatewayV2HTTPRequest {
	e := ev(method, path, "acme", key, "")
	e.RequestContext.Authorizer.Lambda["namespace"] = "shop"
	e.RequestContext.Authorizer.Lambda["worker"] = "checkout"
	e.RequestContext.RequestID = "req-" + apikeys.NewAPIKey()
	return e
}

func (c *commerceHost) run(t *testing.T, status runs.Status) runs.Run {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{"n":1}`), time.Now())
	if err := c.runs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if status != runs.StatusPending {
		var err error
		if r, err = c.runs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, status, "boom", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (c *commerceHost) get(t *testing.T, id string) runs.Run {
	t.Helper()
	r, err := c.runs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCommerceRetryStartsNewRunLinkedToFailedRun: POST /runs/{runId}/retry
// under its own key starts a new run of the failed run's workflow and
// inputs, linked by retryOf; the same retry key replays the same new run
// (never a second one); a run that has not failed is 409
// idemkit.run_not_failed and another tenant's is never found.
func TestCommerceRetryStartsNewRunLinkedToFailedRun(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		failed := c.run(t, runs.StatusFailed)
		path := "/runs/" + runs.ProjectID(failed.ID) + "/retry"
		r, m := c.f.do(t, commerceReq("POST", path, "retry order 7 ✓"))
		if r.StatusCode != 201 || m["retryOf"] != failed.ID || m["status"] != "pending" || m["runId"] == failed.ID || r.Headers["Location"] == "" {
			t.Fatalf("retry: %d %s", r.StatusCode, r.Body)
		}
		newID, _ := m["runId"].(string)
		got := c.get(t, newID)
		if got.RetryOf != failed.ID || got.WorkflowID != failed.WorkflowID || string(got.Inputs) != string(failed.Inputs) || got.Tenant != "acme" {
			t.Fatalf("new run %+v", got)
		}
		// The replay is the new run, still pending (nothing executes it
		// here): with Idempotency-Mode async, the pending Action at once.
		replay := commerceReq("POST", path, "retry order 7 ✓")
		replay.Headers["idempotency-mode"] = "async"
		again, m2 := c.f.do(t, replay)
		if again.StatusCode != 202 || m2["runId"] != newID || again.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("same retry key: %d %s %v", again.StatusCode, again.Body, again.Headers)
		}
		live := c.run(t, runs.StatusRunning)
		r, m = c.f.do(t, commerceReq("POST", "/runs/"+runs.ProjectID(live.ID)+"/retry", "retry live"))
		if r.StatusCode != 409 || m["error"] != CodeRunNotFailed {
			t.Fatalf("retry of a running run: %d %s", r.StatusCode, r.Body)
		}
		other := runs.NewRun("globex", "conformance-noop", nil, time.Now())
		if r, _ := c.f.do(t, commerceReq("POST", "/runs/"+runs.ProjectID(other.ID)+"/retry", "retry other")); r.StatusCode != 403 {
			t.Fatalf("another tenant's run: %d", r.StatusCode)
		}
	})
}

func decidedCancel(id string, version int64, key string) events.APIGatewayV2HTTPRequest {
	e := commerceReq("POST", "/runs/"+runs.ProjectID(id)+"/cancel", key)
	e.Headers["idempotency-decided-version"] = itoa64(version)
	return e
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }

func (c *commerceHost) inbox(t *testing.T) []any {
	t.Helper()
	r, m := c.f.do(t, commerceReq("GET", "/inbox", ""))
	if r.StatusCode != 200 {
		t.Fatalf("GET /inbox: %d %s", r.StatusCode, r.Body)
	}
	es, _ := m["entries"].([]any)
	return es
}

// TestCommerceOfflineCancelAppliedWhenUnrelatedFieldsChanged: a cancel
// queued against version N runs when the run's changes since N touch none
// of the cancel's inputs (only lastError changed); nothing lands in the
// inbox.
func TestCommerceOfflineCancelAppliedWhenUnrelatedFieldsChanged(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		run := c.run(t, runs.StatusPending)
		if _, err := c.runs.NoteFailure(context.Background(), run.ID, "transient", time.Now()); err != nil {
			t.Fatal(err)
		}
		if v := c.get(t, run.ID).Version; v != 2 {
			t.Fatalf("version %d", v)
		}
		r, m := c.f.do(t, decidedCancel(run.ID, 1, "offline cancel 1"))
		if r.StatusCode != 200 || m["status"] != "cancelled" || c.get(t, run.ID).Status != runs.StatusCancelled {
			t.Fatalf("cancel decided against v1: %d %s", r.StatusCode, r.Body)
		}
		if es := c.inbox(t); len(es) != 0 {
			t.Fatalf("inbox %v", es)
		}
	})
}

// TestCommerceOfflineCancelRefusedWithFixWhenStatusChanged: a cancel queued
// against version N while the run's status changed since is refused 409
// idemkit.stale_decision with the fix (the status then and now, the version
// to decide against now), the run is untouched, the same key replays the
// refusal, and the write waits in the caller's inbox.
func TestCommerceOfflineCancelRefusedWithFixWhenStatusChanged(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		run := c.run(t, runs.StatusRunning) // v1 pending, v2 running
		r, m := c.f.do(t, decidedCancel(run.ID, 1, "offline cancel 2"))
		d, _ := m["details"].(map[string]any)
		changes, _ := d["changes"].([]any)
		if r.StatusCode != 409 || m["error"] != decided.CodeStale || d["currentVersion"] != 2.0 || d["decidedVersion"] != 1.0 || len(changes) != 1 {
			t.Fatalf("stale cancel: %d %s", r.StatusCode, r.Body)
		}
		ch := changes[0].(map[string]any)
		if ch["field"] != "status" || ch["old"] != "pending" || ch["new"] != "running" {
			t.Fatalf("the fix: %v", ch)
		}
		if st := c.get(t, run.ID).Status; st != runs.StatusRunning {
			t.Fatalf("a refused cancel moved the run to %s", st)
		}
		again, _ := c.f.do(t, decidedCancel(run.ID, 1, "offline cancel 2"))
		if again.StatusCode != 409 || again.Body != r.Body || again.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("same key: %d %v", again.StatusCode, again.Headers)
		}
		es := c.inbox(t)
		if len(es) != 1 {
			t.Fatalf("inbox %v", es)
		}
		entry := es[0].(map[string]any)
		if entry["id"] != d["inboxId"] || entry["recordId"] != run.ID || entry["operation"] != OpCancelRun || entry["currentVersion"] != 2.0 {
			t.Fatalf("inbox entry %v (refusal %v)", entry, d)
		}
	})
}

// TestCommerceInboxResubmitAndDiscard: a waiting write resubmitted (decided
// again, against the version its refusal named) runs and leaves the inbox;
// one resubmitted after the record changed again stays, with the new fix;
// a discarded one leaves the inbox without running and is decided (409)
// for every later decision; unknown ids are 404.
func TestCommerceInboxResubmitAndDiscard(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		refuse := func(run runs.Run, key string) string {
			t.Helper()
			r, m := c.f.do(t, decidedCancel(run.ID, 1, key))
			d, _ := m["details"].(map[string]any)
			id, _ := d["inboxId"].(string)
			if r.StatusCode != 409 || id == "" {
				t.Fatalf("refusal: %d %s", r.StatusCode, r.Body)
			}
			return id
		}
		// Resubmit: runs against v2 (the refusal's currentVersion).
		a := c.run(t, runs.StatusRunning)
		ida := refuse(a, "queued a")
		r, m := c.f.do(t, commerceReq("POST", "/inbox/"+ida+"/resubmit", "resubmit a"))
		if r.StatusCode != 200 || m["status"] != "cancelled" || c.get(t, a.ID).Status != runs.StatusCancelled {
			t.Fatalf("resubmit: %d %s", r.StatusCode, r.Body)
		}
		if es := c.inbox(t); len(es) != 0 {
			t.Fatalf("a resubmitted write stayed: %v", es)
		}
		// Resubmit after another status change: refused again, stays.
		b := c.run(t, runs.StatusPending)
		if _, err := c.runs.Transition(context.Background(), b.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		idb := refuse(b, "queued b")
		if _, err := c.runs.Transition(context.Background(), b.ID, []runs.Status{runs.StatusRunning}, runs.StatusFailed, "boom", time.Now()); err != nil {
			t.Fatal(err)
		}
		r, m = c.f.do(t, commerceReq("POST", "/inbox/"+idb+"/resubmit", "resubmit b"))
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != 409 || m["error"] != decided.CodeStale || d["currentVersion"] != 3.0 || d["inboxId"] != idb {
			t.Fatalf("resubmit after another change: %d %s", r.StatusCode, r.Body)
		}
		es := c.inbox(t)
		if len(es) != 1 || es[0].(map[string]any)["currentVersion"] != 3.0 {
			t.Fatalf("the refused resubmission: %v", es)
		}
		// Discard: leaves without running.
		r, m = c.f.do(t, commerceReq("POST", "/inbox/"+idb+"/discard", "discard b"))
		if r.StatusCode != 200 || m["status"] != "discarded" || m["id"] != idb {
			t.Fatalf("discard: %d %s", r.StatusCode, r.Body)
		}
		if es := c.inbox(t); len(es) != 0 || c.get(t, b.ID).Status != runs.StatusFailed {
			t.Fatalf("after discard: %v", es)
		}
		for _, p := range []string{"/inbox/" + idb + "/discard", "/inbox/" + idb + "/resubmit"} {
			if r, m := c.f.do(t, commerceReq("POST", p, "after discard "+p)); r.StatusCode != 409 || m["error"] != CodeInboxEntryDecided {
				t.Fatalf("%s: %d %s", p, r.StatusCode, r.Body)
			}
		}
		if r, _ := c.f.do(t, commerceReq("POST", "/inbox/..%2Fx/discard", "unknown id")); r.StatusCode != 404 {
			t.Fatalf("an unknown id: %d %s", r.StatusCode, r.Body)
		}
	})
}
