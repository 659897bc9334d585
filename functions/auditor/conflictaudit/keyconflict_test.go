package conflictaudit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/ledger/fence"
)

// TestKeyConflictWinnerIsTheLowestRunIDWhateverTheOrder: a Layer-1 record
// whose old and new images are two claims that each created a run is a
// conflict whose winner is the lower run id, the same whichever image
// replication delivered last; only where the old image is the winner is it
// restored, whether or not the two share a request id (a takeover keeps
// the first claim's). The same run, a record created again after its
// retention, and images without a run are no conflict; a run overwritten
// by a rival claim still pending is held (HoldKey). The event names the
// record only by a keyhash and carries the runs, the strategy and the
// rule, no content.
func TestKeyConflictWinnerIsTheLowestRunIDWhateverTheOrder(t *testing.T) {
	lo := KeyRecord{Record: "caller:v1:abc", RequestID: "req-1", Run: "acme/AAAA"}
	hi := KeyRecord{Record: "caller:v1:abc", RequestID: "req-2", Run: "acme/BBBB"}
	for _, c := range []struct {
		old, cur KeyRecord
		restore  bool
	}{{lo, hi, true}, {hi, lo, false}} {
		k := DetectKey(c.old, c.cur)
		if k == nil || k.Winner.Run != lo.Run || k.Loser.Run != hi.Run || k.Restore != c.restore || k.Resolution != PartitionRecoveryLexMin {
			t.Fatalf("DetectKey(%v, %v) = %+v", c.old, c.cur, k)
		}
	}
	// A takeover keeps the first claim's request id: the other region's
	// takeover of a replicated claim is a conflict (and held while
	// pending) all the same.
	takeover := hi
	takeover.RequestID = lo.RequestID
	if k := DetectKey(lo, takeover); k == nil || k.Winner.Run != lo.Run || !k.Restore {
		t.Fatalf("DetectKey(%v, %v) = %+v, want a conflict won by %s", lo, takeover, k, lo.Run)
	}
	if k := DetectKey(takeover, lo); k == nil || k.Winner.Run != lo.Run || k.Restore {
		t.Fatalf("DetectKey(%v, %v) = %+v, want a conflict won by %s, not restored", takeover, lo, k, lo.Run)
	}
	if !HoldKey(lo, KeyRecord{Record: lo.Record, RequestID: lo.RequestID, Pending: true}) {
		t.Fatal("HoldKey: a run overwritten by a takeover still pending is not held")
	}
	expired := lo
	expired.Expired = true
	pending := KeyRecord{Record: hi.Record, RequestID: hi.RequestID, Pending: true}
	for _, c := range [][2]KeyRecord{{lo, lo}, {expired, hi}, {lo, pending}, {pending, lo}} {
		if k := DetectKey(c[0], c[1]); k != nil {
			t.Fatalf("DetectKey(%v, %v) = %+v, want none", c[0], c[1], k)
		}
	}
	ended := KeyRecord{Record: hi.Record, RequestID: hi.RequestID} // released, or an answer naming no run
	if !HoldKey(lo, pending) || !HoldKey(lo, ended) || HoldKey(pending, lo) || HoldKey(lo, hi) || HoldKey(expired, pending) || HoldKey(expired, ended) {
		t.Fatal("HoldKey: want exactly a live run overwritten by a rival record naming none (a claim still pending, or ended without a run)")
	}
	var logs bytes.Buffer
	a, err := New(Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1", Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	k := a.ObserveKey(lo, hi)
	if k == nil || k.Strategy != string(fence.ReconciledRecords) || k.Region != "eu-west-1" || k.Kind != KindKey || k.Record == lo.Record ||
		strings.Contains(logs.String(), lo.Record) || strings.Contains(logs.String(), "req-1") || !strings.Contains(logs.String(), `"winner":{"run":"acme/AAAA"}`) {
		t.Fatalf("event %+v, log %s", k, logs.String())
	}
}
