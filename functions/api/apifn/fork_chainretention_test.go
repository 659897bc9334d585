package apifn

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestForkOfAForkPastTheOriginalsRetentionIsRefused (RED_TEAM 470): a
// replay of a fork resolves its side-effecting nodes from the records of
// the run the chain started from (runs.Run.RecordOf), kept the fork
// retention after that run's writes, not after the fork's creation. A
// replay fork of a young fork of a run past the retention is refused 422
// fork_point_invalid with details {sourceRunId, fromSeq, boundary}, the
// boundary the original's; a branch of it, which resolves nothing from a
// record, is accepted as before, and so is a replay fork of it inside the
// original's retention.
func TestForkOfAForkPastTheOriginalsRetentionIsRefused(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	at := func(d time.Duration) {
		f.h.clock = ledgertest.ClockFuncs{NowFunc: func() time.Time { return src.CreatedAt.Add(d) }, SleepFunc: f.h.clock.Sleep}
	}
	for _, mode := range []string{"replay", "branch"} {
		at(DefaultForkRetention - 4*24*time.Hour)
		_, m := f.fork(t, src.ID, "k-chain-retention-first-"+mode, `{"mode":"`+mode+`","fromSeq":5}`)
		first, _ := m["runId"].(string)
		if first == "" {
			t.Fatalf("%s fork inside the retention: %v", mode, m)
		}
		at(DefaultForkRetention - time.Hour)
		if r, m := f.fork(t, first, "k-chain-retention-inside-"+mode, `{"mode":"replay","fromSeq":3}`); r.StatusCode != http.StatusCreated {
			t.Fatalf("replay of a %s fork inside the original's retention: %d %v", mode, r.StatusCode, m)
		}
		at(DefaultForkRetention + time.Hour)
		r, m := f.fork(t, first, "k-chain-retention-past-"+mode, `{"mode":"replay","fromSeq":3}`)
		d, _ := m["details"].(map[string]any)
		wantBoundary := src.CreatedAt.Add(DefaultForkRetention).UTC().Format(time.RFC3339Nano)
		if r.StatusCode != http.StatusUnprocessableEntity || m["error"] != CodeForkPointInvalid || d["sourceRunId"] != first ||
			d["fromSeq"] != 3.0 || d["boundary"] != wantBoundary {
			t.Fatalf("replay of a %s fork past the original's retention: %d %v; want 422 %s, boundary %s", mode, r.StatusCode, m, CodeForkPointInvalid, wantBoundary)
		}
		if r, m := f.fork(t, first, "k-chain-retention-branch-"+mode, `{"mode":"branch","fromSeq":3}`); r.StatusCode != http.StatusCreated {
			t.Fatalf("branch of a %s fork past the original's retention: %d %v", mode, r.StatusCode, m)
		}
	}
}
