package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRedTeamLifecycleRaces races, on one webhook run just created (both
// createRun write paths, every emulator), the executor's start of it from
// the runs stream, a keyed cancel, two copies of a replay fork under one
// key and a fork under another key of the same fromSeq, and a keyed retry,
// all released at once; then settles every run (the stale-run pass drives
// what is left live) and executes the forks; in half the rounds the
// executor takes its record only once the cancel answered, and without
// transactions the cancel's write is applied with its answer lost (once,
// or then throttled past the SDK's retries: its 5xx is sent again under
// its key once the run settled). Held to: the cancel is 200
// cancelled exactly when the run ends cancelled, else 409 run_terminal;
// the run's log (poll) is dense from 0 with exactly one terminal event,
// the last, matching its status; a run cancelled before any execution took
// it (claim epoch 0) delivered nothing; the retry is 409 run_not_failed
// (the run never fails); the two copies of one fork key name one run (or
// one is 409 idempotency_in_flight), the other key another; each fork ends
// once, and no replay fork delivers: the receiver performs the effect at
// most once in all.
func TestRedTeamLifecycleRaces(t *testing.T) {
	stackModes(t, func(t *testing.T, s *rtStack) {
		ctx := context.Background()
		x := s.newExecutor(t, s.e.Client())
		rounds := 4
		if !s.transactional {
			rounds = 8 // the last four with the cancel's write faulted
		}
		for round := range rounds {
			rv := newReceiver(t)
			created, m := s.post(t, "acme", rtKey(), webhookBody(rv.URL, round))
			if created.StatusCode != http.StatusCreated {
				t.Fatalf("createRun: %d %s", created.StatusCode, created.Body)
			}
			id := m["runId"].(string)
			base := "/runs/" + runs.ProjectID(id)
			rec := s.insert(t, id)
			forkKey := rtKey()
			type answer struct {
				status int
				body   map[string]any
				raw    string
			}
			do := func(path, key, body string) answer {
				r, err := s.api.Handle(ctx, apiEvent("POST", path, "acme", key, body))
				must(t, err)
				var m map[string]any
				_ = json.Unmarshal([]byte(r.Body), &m)
				return answer{r.StatusCode, m, r.Body}
			}
			var cancel, retry answer
			cancelKey := rtKey()
			s.runFaults.Clear()
			switch round {
			case 4, 5: // the cancel's write applied, its answer lost once
				s.runFaults.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			case 6, 7: // applied, lost, then throttled past the SDK's retries
				s.runFaults.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
				s.runFaults.FailNext("UpdateItem", 2, dynamotest.Throttle())
			}
			forks := make([]answer, 3)
			var wg sync.WaitGroup
			start := make(chan struct{})
			goer := func(fn func()) {
				wg.Add(1)
				go func() { defer wg.Done(); <-start; fn() }()
			}
			// In odd rounds the executor takes its record only once the
			// cancel has answered: a cancel before the first take.
			cancelled := make(chan struct{})
			goer(func() {
				if round%2 == 1 {
					<-cancelled
				}
				x.HandleRecords(ctx, []stream.StreamRecord{rec})
			})
			goer(func() { defer close(cancelled); cancel = do(base+"/cancel", cancelKey, `{}`) })
			for i := range forks {
				key := forkKey
				if i == 2 {
					key = rtKey()
				}
				goer(func() { forks[i] = do(base+":fork", key, `{"mode":"replay","fromSeq":0}`) })
			}
			goer(func() { retry = do(base+"/retry", rtKey(), "") })
			close(start)
			wg.Wait()

			s.runFaults.Clear()
			src := settle(t, s, x, id)
			if cancel.status >= 500 {
				// Its key sent again (the Layer-1 record released): the
				// cancel's write landed or not, the answer is the run's.
				s.clock.Add(time.Hour)
				cancel = do(base+"/cancel", cancelKey, `{}`)
			}
			switch {
			case cancel.status == http.StatusOK && (cancel.body["status"] != "cancelled" || src.Status != runs.StatusCancelled):
				t.Fatalf("round %d: cancel %d %s, the run %s", round, cancel.status, cancel.raw, src.Status)
			case cancel.status == http.StatusConflict && (errCode(cancel.body) != "run_terminal" || src.Status == runs.StatusCancelled):
				t.Fatalf("round %d: cancel %d %s, the run %s", round, cancel.status, cancel.raw, src.Status)
			case cancel.status != http.StatusOK && cancel.status != http.StatusConflict:
				t.Fatalf("round %d: cancel %d %s", round, cancel.status, cancel.raw)
			}
			checkLog(t, s, id, src.Status)
			if src.Status == runs.StatusCancelled && src.Epoch == 0 {
				if n, _ := rv.stats(); n != 0 {
					t.Fatalf("round %d: cancelled before its first take, yet %d deliveries", round, n)
				}
			}
			if retry.status != http.StatusConflict || errCode(retry.body) != "idemkit.run_not_failed" {
				t.Fatalf("round %d: retry of a run that never failed: %d %s", round, retry.status, retry.raw)
			}
			forkIDs := map[string]bool{}
			for i, f := range forks {
				switch {
				case f.status == http.StatusCreated:
					forkIDs[f.body["runId"].(string)] = true
				case i < 2 && f.status == http.StatusConflict && errCode(f.body) == "idempotency_in_flight":
				default:
					t.Fatalf("round %d: fork %d: %d %s", round, i, f.status, f.raw)
				}
			}
			if forks[0].status == http.StatusCreated && forks[1].status == http.StatusCreated && forks[0].body["runId"] != forks[1].body["runId"] {
				t.Fatalf("round %d: one fork key made two runs: %s, %s", round, forks[0].raw, forks[1].raw)
			}
			if forks[2].status != http.StatusCreated || forks[2].body["runId"] == forks[0].body["runId"] || len(forkIDs) > 2 {
				t.Fatalf("round %d: the second fork key: %s; forks %v", round, forks[2].raw, forkIDs)
			}
			for fid := range forkIDs {
				x.HandleRecords(ctx, []stream.StreamRecord{s.insert(t, fid)})
				fr := settle(t, s, x, fid)
				checkLog(t, s, fid, fr.Status)
			}
			if _, effects := rv.stats(); effects > 1 {
				t.Fatalf("round %d: %d effects performed for one run and its replay forks", round, effects)
			}
		}
	})
}

func errCode(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	s, _ := m["error"].(string)
	if s == "" {
		s, _ = m["code"].(string)
	}
	return s
}

// settle returns run id once it is terminal, moving the clock past the
// stale window and running the stale-run pass while it is live.
func settle(t *testing.T, s *rtStack, x interface {
	ResumeStale(context.Context) (int, error)
}, id string) runs.Run {
	t.Helper()
	for range 10 {
		r := mustRun(t, s, id)
		if r.Status.Terminal() {
			return r
		}
		s.clock.Add(time.Hour)
		if _, err := x.ResumeStale(context.Background()); err != nil {
			t.Logf("stale-run pass: %v", err)
		}
	}
	t.Fatalf("run %s still live after ten stale-run passes", id)
	return runs.Run{}
}

// checkLog polls run id's events and fails unless their sequences are
// dense from 0, exactly one is terminal, it is the last, and it matches
// status; the poll's own status and isTerminal agree.
func checkLog(t *testing.T, s *rtStack, id string, status runs.Status) {
	t.Helper()
	r, err := s.api.Handle(context.Background(), apiEvent("GET", "/runs/"+runs.ProjectID(id)+"/events/poll", "acme", "", ""))
	must(t, err)
	var poll struct {
		Events []struct {
			Sequence int64  `json:"sequence"`
			Type     string `json:"type"`
		} `json:"events"`
		LastSequence int64  `json:"lastSequence"`
		Status       string `json:"status"`
		IsTerminal   bool   `json:"isTerminal"`
	}
	if r.StatusCode != http.StatusOK || json.Unmarshal([]byte(r.Body), &poll) != nil {
		t.Fatalf("poll %s: %d %s", id, r.StatusCode, r.Body)
	}
	terminal := map[string]runs.Status{"run.completed": runs.StatusCompleted, "run.failed": runs.StatusFailed, "run.cancelled": runs.StatusCancelled}
	var types []string
	ends := 0
	for i, e := range poll.Events {
		types = append(types, e.Type)
		if e.Sequence != int64(i) {
			t.Fatalf("run %s: event %d has sequence %d: %v", id, i, e.Sequence, types)
		}
		if st, ok := terminal[e.Type]; ok {
			ends++
			if i != len(poll.Events)-1 || st != status {
				t.Fatalf("run %s (%s): terminal %s at %d of %d", id, status, e.Type, i, len(poll.Events))
			}
		}
	}
	if ends != 1 || poll.Status != string(status) || !poll.IsTerminal || poll.LastSequence != int64(len(poll.Events)-1) {
		t.Fatalf("run %s (%s): %d terminal events, poll %s terminal %v last %d: %s", id, status, ends, poll.Status, poll.IsTerminal, poll.LastSequence, fmt.Sprint(types))
	}
}

// TestRedTeamRetryRacingTheStaleRunPass races, on a running run whose
// execution died and whose run timeout passed (both createRun write paths,
// every emulator), the stale-run pass (which claims the run and fails it
// on its breached timeout) against two keyed retries, released at once
// (in odd rounds as the pass's write failing the run goes out); each
// retry's key is then sent again. Held to: a retry is 201 only of a
// run it read failed, else 409 run_not_failed, and its key sent again
// answers the same run (a first 409 may be followed by a 201: the run
// failed since); the failed run lists exactly the retries answered 201,
// each a run written as its retry; the run's log ends once, failed.
func TestRedTeamRetryRacingTheStaleRunPass(t *testing.T) {
	stackModes(t, func(t *testing.T, s *rtStack) {
		ctx := context.Background()
		x := s.newExecutor(t, s.e.Client())
		sig := &breachSignal{DynamoRuns: x.Runs.(*runs.DynamoRuns)}
		x.Runs = sig
		for round := range 6 {
			rv := newReceiver(t)
			body := fmt.Sprintf(`{"workflowId":"webhook","inputs":{"url":%q,"payload":{"order":%d}},"configurable":{"version":1,"run":{"runTimeoutMs":1000}}}`, rv.URL+"/hook", round)
			created, m := s.post(t, "acme", rtKey(), body)
			if created.StatusCode != http.StatusCreated {
				t.Fatalf("createRun: %d %s", created.StatusCode, created.Body)
			}
			id := m["runId"].(string)
			base := "/runs/" + runs.ProjectID(id)
			// Started by an execution that died.
			_, err := s.runs.Transition(ctx, id, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", s.clock.Now())
			must(t, err)
			s.clock.Add(time.Hour)
			keys := []string{rtKey(), rtKey()}
			answers := make([]string, len(keys))
			codes := make([]int, len(keys))
			var wg sync.WaitGroup
			start, passed := make(chan struct{}), make(chan struct{})
			failing := sig.arm()
			wg.Add(1 + len(keys))
			go func() {
				defer wg.Done()
				defer close(passed)
				<-start
				if _, err := x.ResumeStale(ctx); err != nil {
					t.Errorf("stale-run pass: %v", err)
				}
			}()
			for i, k := range keys {
				go func() {
					defer wg.Done()
					<-start
					if round%2 == 1 {
						// Released as the pass's write failing the run goes out.
						select {
						case <-failing:
						case <-passed:
						}
					}
					r, err := s.api.Handle(ctx, apiEvent("POST", base+"/retry", "acme", k, ""))
					must(t, err)
					codes[i], answers[i] = r.StatusCode, r.Body
				}()
			}
			close(start)
			wg.Wait()
			src := settle(t, s, x, id)
			if src.Status != runs.StatusFailed {
				t.Fatalf("round %d: the run ended %s, want failed on its timeout", round, src.Status)
			}
			checkLog(t, s, id, runs.StatusFailed)
			listed := map[string]bool{}
			for i, k := range keys {
				var m map[string]any
				_ = json.Unmarshal([]byte(answers[i]), &m)
				switch {
				case codes[i] == http.StatusCreated:
				case codes[i] == http.StatusConflict && errCode(m) == "idemkit.run_not_failed":
				default:
					t.Fatalf("round %d: retry %d: %d %s", round, i, codes[i], answers[i])
				}
				again, err := s.api.Handle(ctx, apiEvent("POST", base+"/retry", "acme", k, ""))
				must(t, err)
				var m2 map[string]any
				_ = json.Unmarshal([]byte(again.Body), &m2)
				if codes[i] == http.StatusCreated && (again.StatusCode != http.StatusCreated || m2["runId"] != m["runId"]) {
					t.Fatalf("round %d: retry %d answered %s, then %d %s", round, i, answers[i], again.StatusCode, again.Body)
				}
				if again.StatusCode == http.StatusCreated {
					rid := m2["runId"].(string)
					listed[rid] = true
					if r := mustRun(t, s, rid); r.RetryOf != id {
						t.Fatalf("round %d: retry %d's run %s retries %q", round, i, rid, r.RetryOf)
					}
				} else if codes[i] != http.StatusConflict || again.StatusCode != http.StatusConflict {
					t.Fatalf("round %d: retry %d: %d %s, then %d %s", round, i, codes[i], answers[i], again.StatusCode, again.Body)
				}
			}
			got := mustRun(t, s, id)
			if len(got.Retries) != len(listed) {
				t.Fatalf("round %d: the failed run lists %v, the retries answered 201 are %v", round, got.Retries, listed)
			}
			for _, r := range got.Retries {
				if !listed[r] {
					t.Fatalf("round %d: the failed run lists %s, answered to no retry", round, r)
				}
			}
		}
	})
}

// breachSignal is a run store that closes the channel arm returned as a
// Breach (the write failing a run on a breached cap) is called.
type breachSignal struct {
	*runs.DynamoRuns
	mu sync.Mutex
	ch chan struct{}
}

func (s *breachSignal) arm() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ch = make(chan struct{})
	return s.ch
}

func (s *breachSignal) Breach(ctx context.Context, id string, ev runs.LogEvent, code, msg string, now time.Time) (runs.Run, error) {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
	return s.DynamoRuns.Breach(ctx, id, ev, code, msg, now)
}
