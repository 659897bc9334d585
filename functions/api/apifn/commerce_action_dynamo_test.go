package apifn

// The commerce policy's Action on the reference host: a key binds one run,
// and every answer about it is the run as it is now.

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// commerceCreate is a createRun of acme's checkout worker under key, with
// the wait mode mode ("" for none).
func commerceCreate(key, mode string) events.APIGatewayV2HTTPRequest {
	e := commerceReq("POST", "/runs", key)
	e.Body = `{"workflowId":"conformance-noop","inputs":{"n":1}}`
	if mode != "" {
		e.Headers["idempotency-mode"] = mode
	}
	return e
}

// TestCommerceReplayOfSettledRunIsTheRunInItsFinalStatus: a replay of
// POST /runs answers the run as it is now, in the first answer's shape
// (201, Location, runId, status, links), with its error once it failed, and
// Idempotent-Replayed: true: a run that failed after its 201 replays as
// failed, never as the pending answer recorded at creation.
func TestCommerceReplayOfSettledRunIsTheRunInItsFinalStatus(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		first, m := c.f.do(t, commerceCreate("checkout cart 42", ""))
		id, _ := m["runId"].(string)
		if first.StatusCode != 201 || m["status"] != "pending" || id == "" {
			t.Fatalf("first: %d %s", first.StatusCode, first.Body)
		}
		if _, err := c.runs.Transition(context.Background(), id, []runs.Status{runs.StatusPending}, runs.StatusFailed, "the webhook answered 400", time.Now()); err != nil {
			t.Fatal(err)
		}
		r, m := c.f.do(t, commerceCreate("checkout cart 42", ""))
		errm, _ := m["error"].(map[string]any)
		if r.StatusCode != 201 || m["runId"] != id || m["status"] != "failed" || errm["message"] != "the webhook answered 400" ||
			r.Headers[commerce.HeaderIdempotentReplay] != "true" || r.Headers["Location"] != first.Headers["Location"] || m["statusUrl"] == nil {
			t.Fatalf("replay of a failed run: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
	})
}

// TestCommerceAsyncReplayOfPendingRunIsThePendingAction: a replay of POST
// /runs whose run is still pending, with Idempotency-Mode: async, is that
// pending Action at once: 202 with Retry-After and the run (runId, status,
// links), never a bare request id; nothing runs again.
func TestCommerceAsyncReplayOfPendingRunIsThePendingAction(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		_, m := c.f.do(t, commerceCreate("checkout cart 43", ""))
		id, _ := m["runId"].(string)
		r, m := c.f.do(t, commerceCreate("checkout cart 43", "async"))
		if r.StatusCode != 202 || m["runId"] != id || m["status"] != "pending" || m["statusUrl"] == nil || m["requestId"] != nil ||
			r.Headers["Retry-After"] == "" || r.Headers[commerce.HeaderIdempotentReplay] != "true" {
			t.Fatalf("async replay of a pending run: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
	})
}

// TestCommerceRetryIsLinkedByOnOnEveryRead: the run Action.retry starts is
// linked to the failed one by on (retryOf its alias) on the retry's answer,
// its replay and every GET /runs/{runId} of the new run.
func TestCommerceRetryIsLinkedByOnOnEveryRead(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		failed := c.run(t, runs.StatusFailed)
		path := "/runs/" + runs.ProjectID(failed.ID) + "/retry"
		for i, want := range []int{201, 202} {
			// The replay (async: the new run is pending, no executor here)
			// is the pending Action.
			req := commerceReq("POST", path, "retry order 8")
			req.Headers["idempotency-mode"] = "async"
			r, m := c.f.do(t, req)
			if r.StatusCode != want || m[MemberOn] != failed.ID || m[MemberRetryOf] != failed.ID {
				t.Fatalf("retry answer %d: %d %s", i+1, r.StatusCode, r.Body)
			}
			g, s := c.f.do(t, commerceReq("GET", "/runs/"+runs.ProjectID(m["runId"].(string)), ""))
			if g.StatusCode != 200 || runExt(s)[MemberOn] != failed.ID || runExt(s)[MemberRetryOf] != failed.ID {
				t.Fatalf("GET of the retry: %d %s", g.StatusCode, g.Body)
			}
		}
	})
}

// TestCommerceRunReadCarriesVersionAndIfMatchIsTheDecidedVersion: GET
// /runs/{runId} carries the run's version in its strong ETag ("2.…") and as
// extensions["idemkit.run"].version; a cancel with If-Match of a version
// whose later changes touch its inputs is refused with the same 409
// idemkit.stale_decision and fix as Idempotency-Decided-Version, and with
// the current ETag it runs.
func TestCommerceRunReadCarriesVersionAndIfMatchIsTheDecidedVersion(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		run := c.run(t, runs.StatusRunning) // v1 pending, v2 running
		g, s := c.f.do(t, commerceReq("GET", "/runs/"+runs.ProjectID(run.ID), ""))
		if g.StatusCode != 200 || !strings.HasPrefix(g.Headers["ETag"], `"2.`) || runExt(s)["version"] != 2.0 {
			t.Fatalf("GET: %d %v %s", g.StatusCode, g.Headers, g.Body)
		}
		stale := commerceReq("POST", "/runs/"+runs.ProjectID(run.ID)+"/cancel", "offline cancel if-match")
		stale.Headers["if-match"] = `"1"`
		r, m := c.f.do(t, stale)
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != 409 || m["error"] != decided.CodeStale || d["currentVersion"] != 2.0 || d["inboxId"] == nil {
			t.Fatalf("If-Match of a stale version: %d %s", r.StatusCode, r.Body)
		}
		bad := commerceReq("POST", "/runs/"+runs.ProjectID(run.ID)+"/cancel", "offline cancel weak")
		bad.Headers["if-match"] = `W/"2"`
		if r, m := c.f.do(t, bad); r.StatusCode != 400 || m["error"] != "validation_error" {
			t.Fatalf("a weak If-Match: %d %s", r.StatusCode, r.Body)
		}
		// A version the run never had, sent as If-Match alone, is blamed on
		// If-Match, not on a header the request did not send.
		ahead := commerceReq("POST", "/runs/"+runs.ProjectID(run.ID)+"/cancel", "offline cancel ahead")
		ahead.Headers["if-match"] = `"9"`
		if r, m := c.f.do(t, ahead); r.StatusCode != 400 || m["error"] != "validation_error" ||
			m["details"].(map[string]any)["field"] != "If-Match" || strings.Contains(m["message"].(string), decided.Header) {
			t.Fatalf("If-Match of a version ahead: %d %s", r.StatusCode, r.Body)
		}
		ok := commerceReq("POST", "/runs/"+runs.ProjectID(run.ID)+"/cancel", "offline cancel current")
		ok.Headers["if-match"] = g.Headers["ETag"]
		if r, m := c.f.do(t, ok); r.StatusCode != 200 || m["status"] != "cancelled" {
			t.Fatalf("If-Match of the current version: %d %s", r.StatusCode, r.Body)
		}
	})
}

// TestCommerceInboxIsTheCallersNotTheTenants: under the commerce policy the
// caller is the credential's namespace and worker: another worker, or
// another namespace, of the same tenant can neither list, read, resubmit
// nor discard a waiting write it did not queue (404, not 403), while the
// worker that queued it can.
func TestCommerceInboxIsTheCallersNotTheTenants(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		run := c.run(t, runs.StatusRunning)
		_, m := c.f.do(t, decidedCancel(run.ID, 1, "queued by checkout"))
		d, _ := m["details"].(map[string]any)
		id, _ := d["inboxId"].(string)
		if id == "" {
			t.Fatalf("refusal %v", m)
		}
		as := func(ev events.APIGatewayV2HTTPRequest, ns, worker string) events.APIGatewayV2HTTPRequest {
			ev.RequestContext.Authorizer.Lambda["namespace"], ev.RequestContext.Authorizer.Lambda["worker"] = ns, worker
			return ev
		}
		for _, o := range [][2]string{{"shop", "billing"}, {"other-shop", "checkout"}} {
			r, m := c.f.do(t, as(commerceReq("GET", "/inbox", ""), o[0], o[1]))
			if es, _ := m["entries"].([]any); r.StatusCode != 200 || len(es) != 0 {
				t.Fatalf("%v lists another caller's entry: %d %s", o, r.StatusCode, r.Body)
			}
			for _, verb := range []string{"resubmit", "discard"} {
				if r, _ := c.f.do(t, as(commerceReq("POST", "/inbox/"+id+"/"+verb, verb+" by "+o[1]+o[0]), o[0], o[1])); r.StatusCode != 404 {
					t.Fatalf("%v %s of another caller's entry: %d %s", o, verb, r.StatusCode, r.Body)
				}
			}
		}
		if es := c.inbox(t); len(es) != 1 {
			t.Fatalf("the queuing worker's inbox: %v", es)
		}
		if r, m := c.f.do(t, commerceReq("POST", "/inbox/"+id+"/discard", "discard by checkout")); r.StatusCode != 200 || m["status"] != "discarded" {
			t.Fatalf("discard by the queuing worker: %d %s", r.StatusCode, r.Body)
		}
	})
}

// TestCommerceFailedRunListsItsRetries: every GET /runs/{runId} of a failed
// run lists the runs Action.retry started from it
// (extensions["idemkit.run"].retries, oldest id order irrelevant: a set,
// served sorted), each once however often its retry key is replayed; the
// link is written inside the retry's creation: a retry's first execution
// costs the Layer-1 claim and completion, the read of the failed run, the
// new run's write and the link (5 round trips), and a run that was never
// retried lists none.
func TestCommerceFailedRunListsItsRetries(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		failed := c.run(t, runs.StatusFailed)
		g, s := c.f.do(t, commerceReq("GET", "/runs/"+runs.ProjectID(failed.ID), ""))
		if g.StatusCode != 200 || runExt(s)[MemberRetries] != nil {
			t.Fatalf("a run never retried lists retries: %d %s", g.StatusCode, g.Body)
		}
		path := "/runs/" + runs.ProjectID(failed.ID) + "/retry"
		var want []string
		for _, key := range []string{"retry order 9 a", "retry order 9 b"} {
			c.cnt.Reset()
			r, m := c.f.do(t, commerceReq("POST", path, key))
			if r.StatusCode != 201 {
				t.Fatalf("retry: %d %s", r.StatusCode, r.Body)
			}
			if n := c.cnt.Total(); n != 5 {
				t.Fatalf("a retry's first execution took %d round trips %v, want 5", n, c.cnt.Ops())
			}
			want = append(want, m["runId"].(string))
			replay := commerceReq("POST", path, key)
			replay.Headers["idempotency-mode"] = "async"
			if r, _ := c.f.do(t, replay); r.StatusCode != 202 {
				t.Fatalf("replay of the retry: %d %s", r.StatusCode, r.Body)
			}
		}
		sort.Strings(want)
		g, s = c.f.do(t, commerceReq("GET", "/runs/"+runs.ProjectID(failed.ID), ""))
		got, _ := runExt(s)[MemberRetries].([]any)
		if g.StatusCode != 200 || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("the failed run's retries: %d %s, want %v", g.StatusCode, g.Body, want)
		}
		if v := runExt(s)["version"]; v != float64(failed.Version) {
			t.Fatalf("listing a retry changed the failed run's version: %v, want %d", v, failed.Version)
		}
	})
}

// TestCommerceReplayOfRunCreatingKeyReadsTheRunOnce: under the commerce
// policy a replay of createRun or retryRun costs the Layer-1 replay (one
// round trip, two where a failed condition returns no item) plus one read
// of the run the key created: the round trips docs/PERFORMANCE.md states.
func TestCommerceReplayOfRunCreatingKeyReadsTheRunOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		layer1 := 1
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			layer1 = 2
		}
		_, m := c.f.do(t, commerceCreate("checkout cart 51", ""))
		id, _ := m["runId"].(string)
		if _, err := c.runs.Transition(context.Background(), id, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", time.Now()); err != nil {
			t.Fatal(err)
		}
		c.cnt.Reset()
		if r, _ := c.f.do(t, commerceCreate("checkout cart 51", "")); r.StatusCode != 201 || r.Headers[commerce.HeaderIdempotentReplay] != "true" {
			t.Fatalf("replay of createRun: %d %s", r.StatusCode, r.Body)
		}
		if n, ops := c.cnt.Total(), c.cnt.Ops(); n != layer1+1 || ops["GetItem"] < 1 {
			t.Fatalf("replay of createRun took %d round trips %v, want %d", n, ops, layer1+1)
		}
		path := "/runs/" + runs.ProjectID(id) + "/retry"
		_, m = c.f.do(t, commerceReq("POST", path, "retry cart 51"))
		if _, err := c.runs.Transition(context.Background(), m["runId"].(string), []runs.Status{runs.StatusPending}, runs.StatusCompleted, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		c.cnt.Reset()
		if r, m := c.f.do(t, commerceReq("POST", path, "retry cart 51")); r.StatusCode != 201 || m["status"] != "completed" {
			t.Fatalf("replay of retryRun: %d %s", r.StatusCode, r.Body)
		}
		if n, ops := c.cnt.Total(), c.cnt.Ops(); n != layer1+1 {
			t.Fatalf("replay of retryRun took %d round trips %v, want %d", n, ops, layer1+1)
		}
	})
}
