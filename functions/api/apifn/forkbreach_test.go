package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestForkAtOrAfterACapBreachIsRefused (RED_TEAM 511): a run a cap ended
// records cap.breached just before its run.failed; a fork from a point at
// or after the breach would inherit it as fixed history and then execute.
// Such a fork point is refused 422 fork_point_invalid in the error
// envelope, details {sourceRunId, fromSeq, boundary (the latest forkable
// point), capBreachedSeq}, in both modes and with nothing created; a fork
// from before the breach is 201 as before.
func TestForkAtOrAfterACapBreachIsRefused(t *testing.T) {
	f := newFixture(t)
	envelope, err := wireschema.Load(t).Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	// Events 0 run.started, 1..8 node events, 9 cap.breached, 10 run.failed.
	src := sourceRun(t, f, "acme", runs.StatusRunning)
	breach := runs.LogEvent{Type: runs.EventCapBreached, At: time.Now().UTC(),
		Payload: json.RawMessage(`{"kind":"runTimeoutMs","limit":1,"observed":2}`)}
	if _, err := f.runs.Breach(context.Background(), src.ID, breach, "run_timeout", "the run's runTimeoutMs passed", time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	log := rawEvents(t, f, src.ID)
	var types []string
	for _, raw := range log {
		var e struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	if len(types) != 11 || types[9] != runs.EventCapBreached || types[10] != "run.failed" {
		t.Fatalf("source events: %v", types)
	}
	for _, mode := range []string{"replay", "branch"} {
		for _, seq := range []string{"9", "10"} {
			before := f.runs.Len()
			r, m := f.fork(t, src.ID, "k-fork-breach-"+mode+"-"+seq, `{"mode":"`+mode+`","fromSeq":`+seq+`}`)
			d, _ := m["details"].(map[string]any)
			if r.StatusCode != http.StatusUnprocessableEntity || m["error"] != CodeForkPointInvalid || d["sourceRunId"] != src.ID ||
				d["fromSeq"] != mustFloat(seq) || d["boundary"] != 8.0 || d["capBreachedSeq"] != 9.0 {
				t.Fatalf("%s from %s of a run a cap ended at 9: %d %s; want 422 %s, boundary 8, capBreachedSeq 9",
					mode, seq, r.StatusCode, r.Body, CodeForkPointInvalid)
			}
			if err := wireschema.Validate(envelope, []byte(r.Body)); err != nil {
				t.Fatalf("not an error envelope: %v\n%s", err, r.Body)
			}
			if n := f.runs.Len(); n != before {
				t.Fatalf("a refused fork created %d runs", n-before)
			}
		}
		if r, m := f.fork(t, src.ID, "k-fork-breach-"+mode+"-8", `{"mode":"`+mode+`","fromSeq":8}`); r.StatusCode != http.StatusCreated {
			t.Fatalf("%s from 8, before the breach: %d %v", mode, r.StatusCode, m)
		}
	}
}

func mustFloat(s string) float64 {
	var v float64
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	return v
}
