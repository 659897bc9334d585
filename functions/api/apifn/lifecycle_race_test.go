package apifn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRunLifecycleRaces races, on one run (memory stores), two executors
// (two deliveries of its record: each starts the run, or takes it over
// from the other, appends node events and completes it), a run-timeout
// breach, two cancels under different keys, a retry and a fork, while a
// watcher reads the run. Every round: the run ends exactly once and never
// changes after (the watcher never sees a terminal status replaced); its
// events are dense from 0, unique, with exactly one terminal event, the
// last; at most one of completion, breach and cancel wins, and a
// completion is the executor's that held the run's claim epoch then; a
// 200 cancel means the run ends cancelled and each losing cancel is 409
// run_terminal; a retry answered 201 means the run ended failed (a retry
// of a run that was not failed is 409 run_not_failed); a fork answered
// 201 inherits events that the source, as it ends, still has byte for
// byte.
func TestRunLifecycleRaces(t *testing.T) {
	lifecycleRaces(t, runs.NewMemRuns(), nil, 150)
}

// TestRunLifecycleRacesDynamo is TestRunLifecycleRaces on RunsTable, on
// every emulator (fewer rounds: each is some forty round trips and a
// watcher reading throughout).
func TestRunLifecycleRacesDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		lifecycleRaces(t, &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")}, nil, 12)
	})
	t.Run("transactional", func(t *testing.T) {
		// The runs a retry and a fork write commit with their Layer-1
		// completion (RUNS_TRANSACTIONAL), on the engines with transactions.
		dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
			rs, st := dynamoStores(t, e, e.Client(dynamotest.FastRetries), true)
			lifecycleRaces(t, rs, st, 12)
		})
	})
}

// raceStore is a run store with a node log, as the races need it.
type raceStore interface {
	runs.RunStore
	runs.LogStore
}

// lifecycleRaces runs rounds of TestRunLifecycleRaces on rs, with st as
// the Layer-1 store (nil: in memory). After each
// round the run's getRun snapshot, its poll answer and its events stream
// agree: one status, terminal, the same events (the poll's and the
// stream's), the poll's lastSequence the terminal event's. The watcher
// also checks that the log it reads only ever grows: every event it read
// before is read again unchanged (eventId, type, timestamp, payload).
func lifecycleRaces(t *testing.T, rs raceStore, st idem.Store, rounds int) {
	f := hostOf(t, rs, idem.Config{Store: st}, nil)
	ctx := context.Background()
	for round := range rounds {
		r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), time.Now())
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		base := "/runs/" + runs.ProjectID(r.ID)
		var wg sync.WaitGroup
		start := make(chan struct{})
		done := make(chan struct{})
		var (
			completed, breached bool
			endedAt             [2]int64 // the claim epoch each executor ended the run under (0: it did not)
			cancels             [2]int
			cancelBodies        [2]string
			retry, fork         int
			forkBody            string
			watchErr            error
		)
		goer := func(fn func()) {
			wg.Add(1)
			go func() { defer wg.Done(); <-start; fn() }()
		}
		for x := range endedAt {
			goer(func() { // an executor (two deliveries of the run's record)
				run, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now())
				if errors.Is(err, runs.ErrStatusConflict) && run.Status == runs.StatusRunning {
					run, err = rs.Adopt(ctx, r.ID, time.Now()) // the other delivery started it: taken over
				}
				if err != nil {
					return
				}
				for i := range 3 {
					evs := []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: fmt.Sprint("n", i), At: time.Now().UTC(), Payload: json.RawMessage(`{}`)},
						{Type: runs.EventNodeCompleted, NodeID: fmt.Sprint("n", i), At: time.Now().UTC(), Payload: json.RawMessage(`{}`)}}
					if run, err = rs.AppendLog(ctx, r.ID, run.Fence(), evs, time.Now()); err != nil {
						return
					}
				}
				if _, err = rs.Finish(ctx, r.ID, run.Epoch, runs.StatusCompleted, "", time.Now()); err == nil {
					endedAt[x] = run.Epoch
				}
			})
		}
		goer(func() { // a run timeout
			ev := runs.LogEvent{Type: runs.EventCapBreached, At: time.Now().UTC(), Payload: json.RawMessage(`{"kind":"runTimeoutMs","limit":1,"observed":2}`)}
			_, err := rs.Breach(ctx, r.ID, ev, "run_timeout", "run timed out", time.Now())
			breached = err == nil
		})
		for i := range cancels {
			goer(func() {
				resp, err := f.h.Handle(ctx, ev("POST", base+"/cancel", "acme", fmt.Sprintf("k-cancel-%d-%d-0123456789abcdef", round, i), `{}`))
				if err == nil {
					cancels[i], cancelBodies[i] = resp.StatusCode, resp.Body
				}
			})
		}
		goer(func() {
			resp, err := f.h.Handle(ctx, ev("POST", base+"/retry", "acme", fmt.Sprintf("k-retry-%d-0123456789abcdef", round), ""))
			if err == nil {
				retry = resp.StatusCode
			}
		})
		goer(func() {
			resp, err := f.h.Handle(ctx, ev("POST", base+":fork", "acme", fmt.Sprintf("k-fork-%d-0123456789abcdef", round), `{"mode":"replay","fromSeq":0}`))
			if err == nil {
				fork, forkBody = resp.StatusCode, resp.Body
			}
		})
		go func() { // the watcher
			var ended runs.Status
			var seen []RunEvent
			for {
				select {
				case <-done:
					return
				default:
				}
				cur, err := rs.Get(ctx, r.ID)
				if err != nil {
					watchErr = err
					return
				}
				if ended != "" && cur.Status != ended {
					watchErr = fmt.Errorf("run ended %s, then read %s", ended, cur.Status)
					return
				}
				if cur.Status.Terminal() {
					ended = cur.Status
				}
				now := RunEvents(cur)
				if len(now) < len(seen) {
					watchErr = fmt.Errorf("the log shrank from %d to %d events", len(seen), len(now))
					return
				}
				for i, e := range seen {
					a, _ := json.Marshal(e)
					b, _ := json.Marshal(now[i])
					if string(a) != string(b) {
						watchErr = fmt.Errorf("event %d read %s, then %s", i, a, b)
						return
					}
				}
				seen = now
			}
		}()
		close(start)
		wg.Wait()
		close(done)
		if watchErr != nil {
			t.Fatalf("round %d: %v", round, watchErr)
		}
		got, err := rs.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for x, epoch := range endedAt {
			switch {
			case epoch != 0 && completed:
				t.Fatalf("round %d: both executors completed the run", round)
			case epoch != 0 && epoch != got.Epoch:
				t.Fatalf("round %d: executor %d completed the run under claim epoch %d, another execution held it at %d", round, x, epoch, got.Epoch)
			case epoch != 0:
				completed = true
			}
		}
		wins := 0
		for _, w := range []bool{completed, breached} {
			if w {
				wins++
			}
		}
		won := 0
		for i, st := range cancels {
			var m map[string]any
			_ = json.Unmarshal([]byte(cancelBodies[i]), &m)
			switch {
			case st == 200 && m["status"] == "cancelled":
				won++
			case st == 409 && m["error"] == "run_terminal":
			default:
				t.Fatalf("round %d: cancel %d answered %d %s", round, i, st, cancelBodies[i])
			}
		}
		if wins+won != 1 || !got.Status.Terminal() {
			t.Fatalf("round %d: completed %v, breached %v, %d cancels won; run %s", round, completed, breached, won, got.Status)
		}
		switch {
		case completed && got.Status != runs.StatusCompleted, breached && got.Status != runs.StatusFailed, won == 1 && got.Status != runs.StatusCancelled:
			t.Fatalf("round %d: the winner's end is not the run's: %s", round, got.Status)
		}
		switch {
		case retry == 201 && got.Status != runs.StatusFailed:
			t.Fatalf("round %d: retry created for a run that ended %s", round, got.Status)
		case retry != 201 && retry != 409:
			t.Fatalf("round %d: retry answered %d", round, retry)
		}
		evs := RunEvents(got)
		ids := map[string]bool{}
		for i, e := range evs {
			if e.Sequence != int64(i) || ids[e.EventID] {
				t.Fatalf("round %d: event %d has sequence %d (id seen: %v)", round, i, e.Sequence, ids[e.EventID])
			}
			ids[e.EventID] = true
			terminal := e.Type == EventRunCompleted || e.Type == EventRunFailed || e.Type == EventRunCancelled
			if terminal != (i == len(evs)-1) {
				t.Fatalf("round %d: event %d of %d is %s", round, i, len(evs), e.Type)
			}
		}
		// getRun, poll and the stream say the same.
		resp, _ := f.h.Handle(ctx, ev("GET", base, "acme", "", ""))
		var snap map[string]any
		_ = json.Unmarshal([]byte(resp.Body), &snap)
		resp, _ = f.h.Handle(ctx, eventsReq(base+"/events/poll", "acme", "timeout=1", ""))
		var poll struct {
			Status       string            `json:"status"`
			IsTerminal   bool              `json:"isTerminal"`
			LastSequence int64             `json:"lastSequence"`
			Events       []json.RawMessage `json:"events"`
		}
		_ = json.Unmarshal([]byte(resp.Body), &poll)
		s := f.stream(t, eventsReq(base+"/events", "acme", "streamMode=debug", ""))
		if snap["status"] != string(got.Status) || poll.Status != string(got.Status) || !poll.IsTerminal ||
			poll.LastSequence != int64(len(evs)-1) || len(poll.Events) != len(evs) || len(s.Frames) != len(evs) {
			t.Fatalf("round %d: run %s; getRun %v; poll %s %v last %d, %d events; stream %d frames; log %d events",
				round, got.Status, snap["status"], poll.Status, poll.IsTerminal, poll.LastSequence, len(poll.Events), len(s.Frames), len(evs))
		}
		for i, fr := range s.Frames {
			var pe, se map[string]any
			_ = json.Unmarshal(poll.Events[i], &pe)
			_ = json.Unmarshal([]byte(fr.Data), &se)
			if fmt.Sprint(pe) != fmt.Sprint(se) || fr.ID != fmt.Sprint(i) {
				t.Fatalf("round %d: event %d: poll %v, stream %s %v", round, i, pe, fr.ID, se)
			}
		}
		if fork != 201 {
			t.Fatalf("round %d: fork answered %d %s", round, fork, forkBody)
		}
		var fr map[string]any
		_ = json.Unmarshal([]byte(forkBody), &fr)
		fid, _ := fr["runId"].(string)
		fk, err := rs.Get(ctx, fid)
		if err != nil {
			t.Fatalf("round %d: fork %q: %v", round, fid, err)
		}
		for _, rec := range fk.Fork.Recorded {
			if rec.Sequence >= int64(len(evs)) || evs[rec.Sequence].EventID != rec.EventID || evs[rec.Sequence].Type != rec.Type {
				t.Fatalf("round %d: the fork recorded %s at %d, the source ended without it", round, rec.Type, rec.Sequence)
			}
		}
		if fk.Fork.SourceComplete && len(fk.Fork.Recorded) != countNodeEvents(evs) {
			t.Fatalf("round %d: a fork of a complete source recorded %d of its %d node events", round, len(fk.Fork.Recorded), countNodeEvents(evs))
		}
	}
}

func countNodeEvents(evs []RunEvent) int {
	n := 0
	for _, e := range evs {
		if e.NodeID != "" {
			n++
		}
	}
	return n
}
