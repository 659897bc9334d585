package apifn

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestEveryLifecycleAnswerMatchesTheContract sends every run route (read,
// poll at and past the end, effects, cancel, retry, fork with good and bad
// bodies) to a run in each state the host has (pending, running, parked,
// completed, failed, cancelled), with and without an Idempotency-Key: every
// answer is one the v2 OpenAPI document lists for the route, its body valid
// against the schema it names (the retry route, idemkit's own, against the
// error envelope alone), and every error code registered with the status
// the registry gives it, or a vendor code of the registry's pattern.
func TestEveryLifecycleAnswerMatchesTheContract(t *testing.T) {
	f := newFixture(t)
	go func() {
		for range f.slept {
		}
	}()
	o := wireschema.Load(t)
	env, _ := o.Schema("error-envelope.schema.json")
	reg := registry(t)
	status := map[string]int{}
	for _, r := range reg.Rows {
		status[r.Code] = r.HTTPStatus
	}
	// The registry's vendorCodePattern without its lookahead (Go's RE2 has
	// none): a vendor code never begins "openwop.".
	vendor := regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$`)
	ctx := context.Background()
	mk := map[string]func() runs.Run{
		"pending": func() runs.Run {
			r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), time.Now())
			_ = f.runs.Create(ctx, r)
			return r
		},
		"running":   func() runs.Run { return sourceRun(t, f, "acme", runs.StatusRunning) },
		"completed": func() runs.Run { return sourceRun(t, f, "acme", runs.StatusCompleted) },
		"failed":    func() runs.Run { return sourceRun(t, f, "acme", runs.StatusFailed) },
		"cancelled": func() runs.Run { return sourceRun(t, f, "acme", runs.StatusCancelled) },
		"parked": func() runs.Run {
			r := sourceRun(t, f, "acme", runs.StatusRunning)
			r, err := f.runs.Park(ctx, r.ID, r.Epoch, runs.Wake{At: time.Now().Add(time.Hour), Deadline: time.Now().Add(2 * time.Hour)}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	type op struct{ method, tmpl, suffix, body, ct string }
	ops := []op{
		{"GET", "/runs/{runId}", "", "", ""},
		{"HEAD", "/runs/{runId}", "", "", ""},
		{"GET", "/runs/{runId}/events/poll", "/events/poll?timeout=1", "", ""},
		{"GET", "/runs/{runId}/events/poll", "/events/poll?afterSequence=100&timeout=1", "", ""},
		{"GET", "/runs/{runId}/effects", "/effects", "", ""},
		{"POST", "/runs/{runId}/cancel", "/cancel", `{"reason":"x"}`, ""},
		{"POST", "/runs/{runId}/cancel", "/cancel", `{"reason":7}`, ""},
		{"POST", "/runs/{runId}/retry", "/retry", "", ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"replay"}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"branch"}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"branch","fromSeq":100}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"branch","fromSeq":-1}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"replay","runOptionsOverlay":{"tags":["a"]}}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"branch","fromSeq":9}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"branch","fromSeq":2,"runOptionsOverlay":{"tags":["a"]}}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"nope"}`, ""},
		{"POST", "/runs/{runId}:fork", ":fork", `{"mode":"replay","fromSeq":1.5}`, ""},
	}
	validated := 0
	for name, newRun := range mk {
		for i, op := range ops {
			for _, key := range []string{"", "k-sweep-" + name + "-" + itoa64(int64(i)) + "-000000000000"} {
				r := newRun()
				path := "/runs/" + runs.ProjectID(r.ID) + op.suffix
				e := ev(op.method, path, "acme", key, op.body)
				if i := strings.IndexByte(path, '?'); i >= 0 {
					e.RawPath, e.RequestContext.HTTP.Path, e.RawQueryString = path[:i], path[:i], path[i+1:]
				}
				resp, m := f.do(t, e)
				code, _ := m["error"].(string)
				if resp.StatusCode >= 400 {
					if err := wireschema.Validate(env, []byte(resp.Body)); err != nil {
						t.Errorf("%s %s %s (%s): envelope: %v %s", name, op.method, op.suffix, op.body, err, resp.Body)
					}
					if st, ok := status[code]; ok && st != resp.StatusCode {
						t.Errorf("%s %s %s: %s answered %d, registry %d", name, op.method, op.suffix, code, resp.StatusCode, st)
					} else if !ok && (!vendor.MatchString(code) || strings.HasPrefix(code, "openwop.")) {
						t.Errorf("%s %s %s: %q neither registered nor vendor", name, op.method, op.suffix, code)
					}
				}
				if op.method != "HEAD" && op.tmpl != "/runs/{runId}/retry" {
					if sch, _, err := o.Response(op.method, op.tmpl, resp.StatusCode); err != nil {
						t.Errorf("%s %s %s: %d not in the contract: %v", name, op.method, op.suffix, resp.StatusCode, err)
					} else if sch != nil && resp.Body != "" {
						validated++
						if err := wireschema.Validate(sch, []byte(resp.Body)); err != nil {
							t.Errorf("%s %s %s (%s) %d: %v %s", name, op.method, op.suffix, op.body, resp.StatusCode, err, resp.Body)
						}
					}
				}
			}
		}
	}
	if want := len(mk) * (len(ops) - 2) * 2; validated != want {
		t.Fatalf("%d answers validated against their schema, want %d", validated, want)
	}
}
