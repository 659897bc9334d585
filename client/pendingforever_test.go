package client

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A commerce API whose own handler answers exactly the pending answer's
// body is polled too, to no avail (the README says so): its replay is that
// answer again, polled without counting against MaxAttempts and returned,
// marked a replay, when MaxElapsed is used up; every poll carries the one
// key and body.
func TestAHandlersOwnPendingAnswerIsPolledToTheBudget(t *testing.T) {
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(202)
		_, _ = io.WriteString(w, `{"status":"pending","requestId":"req_1"}`)
	})
	clk := &fakeClock{t: time.Now()}
	c := mustNew(t, Config{MaxAttempts: 2, MaxElapsed: 10 * time.Second, BaseDelay: 100 * time.Millisecond,
		MaxDelay: 100 * time.Millisecond, Now: clk.Now, Sleep: clk.Sleep})
	resp, body, err := post(t, c, s.srv.URL, `{"cart":"c1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 202 || !resp.Replayed || !strings.Contains(body, `"pending"`) {
		t.Fatalf("status %d replayed %v body %q", resp.StatusCode, resp.Replayed, body)
	}
	// Waits of 1 s and a little jitter within a 10 s budget: 8 to 10 polls
	// after the first attempt, far more than MaxAttempts 2.
	if resp.Attempts < 9 || resp.Attempts > 11 || s.count() != resp.Attempts || clk.slept > 10*time.Second {
		t.Fatalf("attempts %d (server %d), slept %v", resp.Attempts, s.count(), clk.slept)
	}
	sameKeys(t, s, resp.Key)
	sameBodies(t, s, `{"cart":"c1"}`)
}
