package apifn

import (
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestForkRetriedAcrossTheRetentionBoundaryKeepsItsFork: a keyed fork
// made just inside the fork retention wrote its run and died before its
// Layer-1 completion (the run is not part of the completion: memory and
// conditional DynamoDB writes). The key's retry, after the lease, comes
// past the retention boundary: it re-executes, and its fork exists, so it
// answers that fork's 201 (then replays it), never a 422
// fork_point_invalid recorded as the key's answer while the fork it
// created runs. A new key past the boundary is still refused. Memory and
// every emulator.
func TestForkRetriedAcrossTheRetentionBoundaryKeepsItsFork(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		const key, body = "k-fork-boundary-0000000001", forkReplayBody
		f, src, fork := forkLostInsideRetention(t, e, key)
		r, m := f.fork(t, src.ID, key, body)
		if r.StatusCode != http.StatusCreated || m["runId"] != fork {
			t.Fatalf("the key's retry past the retention boundary: %d %s, want 201 naming its fork %s", r.StatusCode, r.Body, fork)
		}
		if again, m2 := f.fork(t, src.ID, key, body); again.StatusCode != http.StatusCreated || m2["runId"] != fork {
			t.Fatalf("the key's replay: %d %s", again.StatusCode, again.Body)
		}
		if r, m := f.fork(t, src.ID, "k-fork-boundary-0000000002", body); r.StatusCode != http.StatusUnprocessableEntity || m["error"] != CodeForkPointInvalid {
			t.Fatalf("a new key past the boundary: %d %s, want 422 %s", r.StatusCode, r.Body, CodeForkPointInvalid)
		}
	})
}
