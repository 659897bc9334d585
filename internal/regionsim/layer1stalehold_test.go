package regionsim_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/stream"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
)

// TestLayer1StaleHoldAfterConvergenceRestoresNothing: a stream change the
// auditor already acted on may come again (a batch retried after a later
// record's failure, or read again after the records converged). Here eu's
// record names eu's run when us's pending claim of the same key
// replicates over it: eu's auditor holds the record (writes eu's back)
// until us's run is known, and both regions then converge on us's run,
// the lower one. Delivered again after that, the same change must write
// nothing: the record it would restore over is no longer the pending
// claim it saw but a record naming a lower run, and writing eu's higher
// run back would flip the converged record (a replay in eu would answer
// the higher run until the auditors flipped it back).
func TestLayer1StaleHoldAfterConvergenceRestoresNothing(t *testing.T) {
	const low, high = "acme/aaaa-second-012345678", "acme/zzzz-first-0123456789"
	started, release := make(chan struct{}), make(chan struct{})
	w := newAudited(t, auditedConfig{keep: true, handler: func(r string) http.HandlerFunc {
		return func(rw http.ResponseWriter, _ *http.Request) {
			run := high
			if r == us {
				run = low
				close(started)
				<-release // still pending when its claim replicates to eu
			}
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(rw, `{"runId":"`+run+`","status":"pending"}`)
		}
	}})
	w.rep.SetPartitioned(true)
	if r, b := w.post(eu); r.StatusCode != http.StatusCreated || !strings.Contains(b, high) {
		t.Fatalf("eu: %d %s", r.StatusCode, b)
	}
	w.step(10 * time.Millisecond) // eu's claim and completion observed
	usDone := make(chan string, 1)
	go func() {
		resp, b := w.post(us)
		usDone <- resp.Status + " " + b
	}()
	<-started
	w.step(0) // us's pending claim observed, newer than eu's writes
	w.rep.SetPartitioned(false)
	w.clock.Advance(2 * time.Second)
	w.step(0) // us's pending claim applied over eu's completed record; eu's writes lose in us
	close(release)
	if got := <-usDone; !strings.Contains(got, "201") || !strings.Contains(got, low) {
		t.Fatalf("us: %s", got)
	}
	w.sync()
	if w.auditErr != nil {
		t.Fatal(w.auditErr)
	}
	var hold *stream.StreamRecord
	for _, c := range w.seen {
		if c.Region != eu || c.Old == nil || c.New == nil {
			continue
		}
		o, err1 := idemdynamo.DecodeItem(c.Old)
		n, err2 := idemdynamo.DecodeItem(c.New)
		if err1 == nil && err2 == nil && o.Response != nil && strings.Contains(string(o.Response.Body), high) && n.Response == nil {
			hold = &stream.StreamRecord{EventName: c.Event, Keys: c.Keys, OldImage: c.Old, NewImage: c.New}
		}
	}
	if hold == nil {
		t.Fatal("eu's stream never showed us's pending claim over eu's record (the hold)")
	}
	converged := func(when string) {
		t.Helper()
		for _, r := range []string{eu, us} {
			rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r))
			if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), low) {
				t.Fatalf("%s: %s's replica holds %s (%v); want the lower run %s's record", when, r, body(&rec), err, low)
			}
		}
	}
	converged("after healing")
	events, _ := w.events()
	cnt := w.auditors[eu].Audit(ctx(t), []stream.StreamRecord{*hold})
	if cnt.RestoreErr != nil {
		t.Fatal(cnt.RestoreErr)
	}
	if cnt.Restored != 0 {
		t.Errorf("the hold delivered again after convergence restored %d records, want none", cnt.Restored)
	}
	converged("after the hold was delivered again")
	// A batch delivered again may record its conflict again (auditfn's
	// package doc), but only as what it is: the lower run the winner.
	again, _ := w.events()
	if len(events) != 1 {
		t.Fatalf("%d Layer-1 conflict events before the redelivery; want 1 (TestLayer1ConflictIsRecordedOnce)", len(events))
	}
	for _, ev := range again {
		w, _ := ev["winner"].(map[string]any)
		l, _ := ev["loser"].(map[string]any)
		if w["run"] != low || l["run"] != high {
			t.Errorf("conflict event %v; want winner %s, loser %s", ev, low, high)
		}
	}
}
