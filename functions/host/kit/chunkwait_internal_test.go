package kit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// lostChunkStore answers every claim as a completed record (retention end
// expires) whose response has a chunk item missing, as the dynamostore
// reads one.
type lostChunkStore struct {
	idem.Store
	expires time.Time
}

func (s lostChunkStore) Claim(context.Context, idem.Record, time.Time) (idem.ClaimResult, error) {
	return idem.ClaimResult{Decision: idem.Exists, Record: idem.Record{ID: "caller:v1:x", State: idem.StateCompleted, Expires: s.expires}},
		fmt.Errorf("%w: chunk 1 of 2 missing", idem.ErrNotKept)
}

// Get answers as idem/dynamostore does: the record without its response,
// found, beside the error.
func (s lostChunkStore) Get(context.Context, string, time.Time) (idem.Record, bool, error) {
	return idem.Record{ID: "caller:v1:x", State: idem.StateCompleted, Expires: s.expires}, true,
		fmt.Errorf("%w: chunk 1 of 2 missing", idem.ErrNotKept)
}

// A record's completion is judged as its retention end less the
// retention the function runs with, which is the retention the record was
// written with unless a redeploy changed it. A record completed under a
// week's retention and read after a redeploy to 24 h looks completed six
// days in the future: its missing chunk, lost an hour after the
// completion, must be answered 410 (final), not 503 for six days. Within
// the five minutes either side of the judged completion (the other
// region's clock may run ahead) the chunk is still taken for one
// replicating.
func TestReplicatingChunksAfterARetentionChange(t *testing.T) {
	completed := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		written   time.Duration // the retention the record was written with
		now       time.Time
		replicate bool // answered as chunks still replicating (503)
	}{
		{"same retention, a second after", 24 * time.Hour, completed.Add(time.Second), true},
		{"same retention, the writer's clock 30 s ahead", 24 * time.Hour, completed.Add(-30 * time.Second), true},
		{"same retention, an hour after", 24 * time.Hour, completed.Add(time.Hour), false},
		{"written under a week, an hour after", 7 * 24 * time.Hour, completed.Add(time.Hour), false},
		{"written under a week, five days after", 7 * 24 * time.Hour, completed.Add(5 * 24 * time.Hour), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := replicatingChunks{Store: lostChunkStore{expires: completed.Add(c.written)}, retention: 24 * time.Hour}
			_, err := s.Claim(context.Background(), idem.Record{}, c.now)
			if got := errors.Is(err, idem.ErrStoreUnavailable); got != c.replicate || !got && !errors.Is(err, idem.ErrNotKept) {
				t.Fatalf("%v; want store unavailable (chunks replicating): %t, else not kept", err, c.replicate)
			}
			// A waiting duplicate's poll (Get) is judged alike (RED_TEAM 341).
			_, _, err = s.Get(context.Background(), "caller:v1:x", c.now)
			if got := errors.Is(err, idem.ErrStoreUnavailable); got != c.replicate || !got && !errors.Is(err, idem.ErrNotKept) {
				t.Fatalf("Get: %v; want store unavailable (chunks replicating): %t, else not kept", err, c.replicate)
			}
		})
	}
}
