package devstack_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestAfterAcceptKillServesNothingMore: once the durability seam has
// answered an after-accept exercise, the process it is about to kill
// serves nothing more. Every request from then on, discovery included, is
// answered 503 idemkit.restarting with Connection: close, and a second
// exercise stages no run.
//
// The kill lands a moment after the answer, so that the answer reaches
// the client whole. A process that went on serving in that moment looked
// to the suite as if it were already back. The suite then staged its next
// exercise (during-execution) on the process that was about to die, which
// lost that exercise's kill: the restarted process ran the run to
// completion with no restart in between, and the row failed ("completed
// with 1 run.started and 0 restored").
//
// The fake supervisor's Kill is recorded and does not end the test
// process, so nothing here depends on when the kill lands.
func TestAfterAcceptKillServesNothingMore(t *testing.T) {
	const key = "idk_dying_test_0123456789abcdef"
	var once sync.Once
	killed := make(chan struct{})
	s := startStack(t, devstack.Options{ConformanceSeams: true, APIKeys: []string{key + "=acme"},
		Restart: &devstack.Restart{Delay: time.Second, BootBudget: time.Minute, Kill: func() { once.Do(func() { close(killed) }) }}})
	do := func(method, path, body string) (*http.Response, map[string]any) {
		t.Helper()
		return testutil.DoJSON(t, method, s.URL()+path, body, "Authorization", testutil.Bearer(key))
	}
	if r, m := do("GET", "/.well-known/openwop", ""); r.StatusCode != http.StatusOK {
		t.Fatalf("discovery before the exercise: %d %v", r.StatusCode, m)
	}
	r, m := do("POST", "/host/durability/kill", `{"mode":"after-accept","workflowId":"conformance-noop"}`)
	if r.StatusCode != http.StatusCreated || m["runId"] == nil {
		t.Fatalf("after-accept: %d %v", r.StatusCode, m)
	}
	check := func(when string) {
		t.Helper()
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/.well-known/openwop", ""},
			{"GET", "/runs/" + m["runId"].(string), ""},
			{"POST", "/host/durability/kill", `{"mode":"during-execution","workflowId":"conformance-noop"}`},
		} {
			r, got := do(c.method, c.path, c.body)
			if r.StatusCode != http.StatusServiceUnavailable || got["error"] != devstack.CodeRestarting || r.Header.Get("Retry-After") == "" || !r.Close {
				t.Fatalf("%s %s %s: %d close=%v Retry-After=%q %v, want 503 %s with Retry-After and Connection: close",
					when, c.method, c.path, r.StatusCode, r.Close, r.Header.Get("Retry-After"), got, devstack.CodeRestarting)
			}
			if got["runId"] != nil {
				t.Fatalf("%s: a second exercise was staged: %v", when, got)
			}
		}
	}
	check("before the kill")
	select {
	case <-killed:
	case <-time.After(time.Minute): // a hang guard, not a speed limit
		t.Fatal("the seam never killed the process")
	}
	check("after the kill")
}
