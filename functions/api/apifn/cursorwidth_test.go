package apifn

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestCursorsPastTheLogAnyWidth: a cursor is a non-negative integer of any
// width (the OpenAPI document bounds afterSequence below only). One past
// the end of the log, even wider than 64 bits, is no error: poll answers
// 200 with no events (events.md §Poll: a cursor past the end of the log
// MUST return 200 with an empty events array), and the stream of a
// terminal run closes without a frame (§Resuming with Last-Event-ID: a
// host MUST NOT refuse a well-formed non-negative integer because no event
// carries that sequence). Leading zeros are the same number.
func TestCursorsPastTheLogAnyWidth(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	f.move(t, r.ID, runs.StatusPending, runs.StatusRunning, "", t0.Add(time.Second))
	f.move(t, r.ID, runs.StatusRunning, runs.StatusCompleted, "", t0.Add(2*time.Second))
	base := "/runs/" + runs.ProjectID(r.ID)
	for _, c := range []struct {
		cursor string
		events int
	}{
		{"99999999999999999999", 0},
		{"9223372036854775808", 0},
		{"9223372036854775807", 0},
		{"000000000000000000000000000000", 1},
		{"1", 0},
	} {
		resp, m := f.do(t, eventsReq(base+"/events/poll", "acme", "afterSequence="+c.cursor, ""))
		evs, _ := m["events"].([]any)
		if resp.StatusCode != 200 || len(evs) != c.events || m["lastSequence"] != float64(1) {
			t.Fatalf("poll afterSequence=%s: %d %s, want 200 with %d events", c.cursor, resp.StatusCode, resp.Body, c.events)
		}
		s := f.stream(t, eventsReq(base+"/events", "acme", "", c.cursor))
		if len(s.Frames) != c.events {
			b, _ := json.Marshal(s.Frames)
			t.Fatalf("stream Last-Event-ID %s: frames %s, want %d", c.cursor, b, c.events)
		}
	}
}
