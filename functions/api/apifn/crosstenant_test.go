package apifn

// Another tenant's run, named on any route of the route table, is answered
// exactly as a run of that tenant that does not exist, and one
// Idempotency-Key sent by two tenants on every idempotent route is two
// records: neither tenant is ever answered the other's replay.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// crossTenantBody is the body a route of the table is sent with in the
// cross-tenant tests: one its check accepts.
func crossTenantBody(r Route) string {
	switch r.Op {
	case "cancelRun", OpPauseRun, OpResumeRun:
		return `{"reason":"cross-tenant"}`
	case "forkRun":
		return `{"mode":"replay"}`
	}
	return ""
}

// answerShape is everything of an answer a caller can see, but the
// request id (each request's own): status, every header and the body.
func answerShape(r events.APIGatewayV2HTTPResponse, requestID string) string {
	var hs []string
	for k, v := range r.Headers {
		hs = append(hs, strings.ToLower(k)+": "+strings.ReplaceAll(v, requestID, "<request>"))
	}
	for k, vs := range r.MultiValueHeaders {
		hs = append(hs, strings.ToLower(k)+": "+strings.ReplaceAll(strings.Join(vs, ","), requestID, "<request>"))
	}
	sort.Strings(hs)
	return fmt.Sprintf("%d\n%s\n%s", r.StatusCode, strings.Join(hs, "\n"), strings.ReplaceAll(r.Body, requestID, "<request>"))
}

// TestAnotherTenantsRunIsNoRunOnEveryRoute: globex names acme's runs (a
// failed one, a running one) on every route of the table whose pattern
// holds {runId}, in each projection of the id, HEAD included, and an id of
// acme's of the same shape that names no run: every answer is the same
// (status, headers and body, the request id aside), so nothing discloses
// that acme's runs exist; the same holds for globex's own tenant segment
// before acme's opaque part (no run of globex's) against a made-up one, and
// for bulkCancelRuns' entries. Nothing of acme's changes, and globex is
// never answered with acme's run id.
func TestAnotherTenantsRunIsNoRunOnEveryRoute(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		ctx := context.Background()
		create := func(key string) string {
			r, m := f.do(t, ev("POST", "/runs", "acme", key, `{"workflowId":"conformance-noop","inputs":{"x":"acme-secret-input"}}`))
			id, _ := m["runId"].(string)
			if r.StatusCode != http.StatusCreated || id == "" {
				t.Fatalf("acme's createRun: %d %s", r.StatusCode, r.Body)
			}
			return id
		}
		failed, running := create("acme-create-failed-00000001"), create("acme-create-running-0000001")
		if _, err := rs.Transition(ctx, failed, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, running, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		opaque := func(id string) string { return id[strings.IndexByte(id, '/')+1:] }
		ghostOpaque := strings.Repeat("z", len(opaque(failed)))
		encodings := []func(tenant, opaque string) string{
			func(t, o string) string { return t + "~2F" + o },
			func(t, o string) string { return t + "%2F" + o },
			func(t, o string) string { return t + "/" + o },
		}
		const reqID = "req-cross-tenant"
		n := 0
		send := func(r Route, tenant, path string) events.APIGatewayV2HTTPResponse {
			n++
			key := ""
			if r.Idempotent {
				key = fmt.Sprintf("globex-cross-tenant-%08d", n)
			}
			q := ""
			if r.Op == "pollRunEvents" {
				q = "timeout=1"
			}
			e := ev(r.Method, path, tenant, key, crossTenantBody(r))
			e.RawQueryString = q
			if q != "" {
				e.QueryStringParameters = map[string]string{"timeout": "1"}
			}
			e.RequestContext.RequestID = reqID
			resp, _ := f.do(t, e)
			if strings.Contains(resp.Body, opaque(failed)) || strings.Contains(resp.Body, opaque(running)) || strings.Contains(resp.Body, "acme-secret-input") {
				t.Errorf("globex %s %s: the answer carries acme's run: %d %s", r.Method, path, resp.StatusCode, resp.Body)
			}
			return resp
		}
		routes := 0
		for _, r := range Routes {
			if !strings.Contains(r.Pattern, "{runId}") {
				continue
			}
			routes++
			for _, enc := range encodings {
				// Every id of one list is answered alike, and none 2xx.
				alike := func(seg string, opaques []string, what string) {
					want := ""
					for _, o := range opaques {
						path := strings.Replace(r.Pattern, "{runId}", enc(seg, o), 1)
						got := answerShape(send(r, "globex", path), reqID)
						if want == "" {
							want = got
							if strings.HasPrefix(got, "2") {
								t.Errorf("globex %s %s: %s", r.Method, path, got)
							}
						} else if got != want {
							t.Errorf("globex %s on %s %s:\n%s\nbut on an id naming no run:\n%s", r.Op, what, path, got, want)
						}
					}
				}
				// acme's segment: acme's two runs and a run acme does not have.
				alike("acme", []string{opaque(failed), opaque(running), ghostOpaque}, "acme's run")
				// globex's own segment before acme's opaque part: no run
				// of globex's, answered as one made up.
				alike("globex", []string{ghostOpaque, opaque(failed), opaque(running)}, "(acme's opaque part)")
			}
		}
		if routes < 12 {
			t.Fatalf("only %d routes name a run: the table changed, so must this test", routes)
		}
		// bulkCancelRuns: acme's runs are entries like a made-up one.
		n++
		be := ev("POST", "/runs:bulk-cancel", "globex", fmt.Sprintf("globex-cross-tenant-%08d", n),
			`{"runIds":["`+failed+`","`+running+`","acme/`+ghostOpaque+`","globex/`+opaque(failed)+`","globex/`+ghostOpaque+`"]}`)
		be.RequestContext.RequestID = reqID
		resp, m := f.do(t, be)
		res, _ := m["results"].([]any)
		if resp.StatusCode != 200 || len(res) != 5 {
			t.Fatalf("globex's bulk cancel: %d %s", resp.StatusCode, resp.Body)
		}
		entry := func(i int) string {
			e, _ := res[i].(map[string]any)
			delete(e, "runId")
			b, _ := json.Marshal(e)
			return string(b)
		}
		for _, pair := range [][2]int{{0, 2}, {1, 2}, {3, 4}} {
			if a, b := entry(pair[0]), entry(pair[1]); a != b {
				t.Errorf("globex's bulk cancel: entry %d is %s, entry %d (no run) %s", pair[0], a, pair[1], b)
			}
		}
		for id, want := range map[string]runs.Status{failed: runs.StatusFailed, running: runs.StatusRunning} {
			if got, err := rs.Get(ctx, id); err != nil || got.Status != want {
				t.Errorf("acme's run %s after globex's requests: %v %v, want %s", id, got.Status, err, want)
			}
		}
	})
}

// TestOneKeyTwoTenantsOnEveryIdempotentRoute: acme and globex each send
// the same Idempotency-Key on every idempotent route of the table that
// names a run (and createRun, bulkCancelRuns and the live work-order
// route), each on its own runs, acme first: globex's request runs (it is never a replay, never a
// mismatch, never acme's answer), and acme's key, sent again, still
// replays acme's answer.
func TestOneKeyTwoTenantsOnEveryIdempotentRoute(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		ctx := context.Background()
		const shared = "shared-key-of-two-tenants-0001"
		body := `{"workflowId":"conformance-noop","inputs":{"x":1}}`
		created := map[string]string{}
		for _, tenant := range []string{"acme", "globex"} {
			r, m := f.do(t, ev("POST", "/runs", tenant, shared, body))
			id, _ := m["runId"].(string)
			if r.StatusCode != http.StatusCreated || !strings.HasPrefix(id, tenant+"/") || r.Headers["Openwop-Idempotent-Replay"] == "true" {
				t.Fatalf("%s's createRun under the shared key: %d %v %s", tenant, r.StatusCode, r.Headers, r.Body)
			}
			created[tenant] = id
		}
		// Per tenant, a failed run to retry and fork, and a running one to
		// pause, resume and cancel.
		mk := func(tenant, key string, to runs.Status) string {
			_, m := f.do(t, ev("POST", "/runs", tenant, key, body))
			id, _ := m["runId"].(string)
			if _, err := rs.Transition(ctx, id, []runs.Status{runs.StatusPending}, to, "x", time.Now()); err != nil {
				t.Fatal(err)
			}
			return id
		}
		own := map[string]map[runs.Status]string{}
		for _, tenant := range []string{"acme", "globex"} {
			own[tenant] = map[runs.Status]string{
				runs.StatusFailed:  mk(tenant, tenant+"-failed-run-000000001", runs.StatusFailed),
				runs.StatusRunning: mk(tenant, tenant+"-running-run-00000001", runs.StatusRunning),
			}
		}
		steps := []struct {
			op, method, pattern, body string
			on                        runs.Status
		}{
			{"forkRun", "POST", "/runs/{runId}:fork", `{"mode":"replay"}`, runs.StatusFailed},
			{"retryRun", "POST", "/runs/{runId}/retry", "", runs.StatusFailed},
			{OpPauseRun, "POST", "/runs/{runId}:pause", `{}`, runs.StatusRunning},
			{OpResumeRun, "POST", "/runs/{runId}:resume", `{}`, runs.StatusRunning},
			{"cancelRun", "POST", "/runs/{runId}/cancel", `{}`, runs.StatusRunning},
			{"bulkCancelRuns", "POST", "/runs:bulk-cancel", "", runs.StatusRunning},
		}
		covered := map[string]bool{"createRun": true}
		for i, s := range steps {
			covered[s.op] = true
			key := fmt.Sprintf("shared-step-key-%02d-0000000000", i)
			first := map[string]string{}
			for _, tenant := range []string{"acme", "globex"} {
				id := own[tenant][s.on]
				path, b := strings.Replace(s.pattern, "{runId}", runs.ProjectID(id), 1), s.body
				if s.op == "bulkCancelRuns" {
					b = `{"runIds":["` + id + `"]}`
				}
				r, _ := f.do(t, ev(s.method, path, tenant, key, b))
				if r.StatusCode >= 400 || r.Headers["Openwop-Idempotent-Replay"] == "true" {
					t.Errorf("%s's %s under a key acme used first: %d %v %s", tenant, s.op, r.StatusCode, r.Headers, r.Body)
				}
				other := map[string]string{"acme": "globex", "globex": "acme"}[tenant]
				if strings.Contains(r.Body, other+"/") {
					t.Errorf("%s's %s answer names the other tenant's run: %s", tenant, s.op, r.Body)
				}
				first[tenant] = r.Body
				// The same key again is this tenant's own replay.
				again, _ := f.do(t, ev(s.method, path, tenant, key, b))
				if again.Headers["Openwop-Idempotent-Replay"] != "true" || again.Body != r.Body {
					t.Errorf("%s's %s sent again: %d %v %s, want the replay of %s", tenant, s.op, again.StatusCode, again.Headers, again.Body, r.Body)
				}
			}
		}
		// The live work-order route keeps nothing but its Layer-1 record:
		// globex's work order under acme's key is processed as globex's.
		covered[OpLiveWorkOrder] = true
		for _, tenant := range []string{"acme", "globex"} {
			wo := `{"work_order_number":"WO-` + tenant + `","projects":[{"code":"P-1","name":"n","quantity":2}]}`
			r, m := f.do(t, ev("POST", LiveWorkOrderPath, tenant, "shared-work-order-key-000001", wo))
			if r.StatusCode != http.StatusCreated || m["work_order_number"] != "WO-"+tenant || r.Headers["Openwop-Idempotent-Replay"] == "true" {
				t.Errorf("%s's work order under a key acme used first: %d %v %s", tenant, r.StatusCode, r.Headers, r.Body)
			}
		}
		for _, r := range Routes {
			if r.Idempotent && !r.Public && !strings.HasPrefix(r.Pattern, "/inbox/") && !covered[r.Op] {
				t.Errorf("idempotent route %s %s (%s) is not covered", r.Method, r.Pattern, r.Op)
			}
		}
	})
}
