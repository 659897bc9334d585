package apifn

// A retried resubmission of an inbox entry whose write may already have run
// is answered exactly: 200 cancelled only when the run was cancelled by this
// resubmission's own write (the run's CancelledBy is its Layer-1 record),
// 409 run_terminal when another request cancelled it. On memory and on
// every emulator.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// cancelSpy is a RunStore that notes which request's Cancel moved a run
// (the request's tag, from its context under whoKey, with the by it
// recorded) and, when armed, loses the answer of the next Cancel that
// moved one (the write landed, the caller sees an error).
type cancelSpy struct {
	runs.RunStore
	mu     sync.Mutex
	lose   bool
	landed map[string]string // tag → by, of each Cancel that moved a run
	// before, if set, runs before each Cancel's write with the request's
	// tag (the write then runs against the run as before left it).
	before func(who string)
}

type whoKey struct{}

type eventReq = events.APIGatewayV2HTTPRequest

func (s *cancelSpy) Cancel(ctx context.Context, id string, from []runs.Status, by, reason string, now time.Time) (runs.Run, error) {
	who, _ := ctx.Value(whoKey{}).(string)
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(who)
	}
	r, err := s.RunStore.Cancel(ctx, id, from, by, reason, now)
	if err != nil {
		return r, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.landed[who] = by
	if s.lose {
		s.lose = false
		return runs.Run{}, errLost
	}
	return r, nil
}

// CancelAt is Cancel's spy for a cancel conditional on the run's version
// (runs.VersionCanceller, which the spied store implements).
func (s *cancelSpy) CancelAt(ctx context.Context, id string, v int64, by, reason string, now time.Time) (runs.Run, error) {
	who, _ := ctx.Value(whoKey{}).(string)
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(who)
	}
	r, err := s.RunStore.(runs.VersionCanceller).CancelAt(ctx, id, v, by, reason, now)
	if err != nil {
		return r, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.landed[who] = by
	if s.lose {
		s.lose = false
		return runs.Run{}, errLost
	}
	return r, nil
}

func (s *cancelSpy) reset() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.landed
	s.landed = map[string]string{}
	return l
}

// retryHost is inboxHost with its inbox behind a lossy and its runs behind
// a cancelSpy.
func retryHost(t *testing.T, e *dynamotest.Emulator) (*fixture, runs.RunStore, *lossy, *cancelSpy) {
	t.Helper()
	var l *lossy
	var spy *cancelSpy
	f, rs := inboxHost(t, e, func(c *Config) {
		base, err := defaultInbox(c.Runs)
		if err != nil {
			t.Fatal(err)
		}
		l = &lossy{Store: base}
		spy = &cancelSpy{RunStore: c.Runs, landed: map[string]string{}}
		c.Inbox, c.Runs = l, spy
	})
	return f, rs, l, spy
}

// post sends req tagged who and returns its status, decoded body and raw
// body.
func post(t *testing.T, f *fixture, who string, req eventReq) (int, map[string]any, string) {
	t.Helper()
	r, err := f.h.Handle(context.WithValue(context.Background(), whoKey{}, who), req)
	if err != nil {
		t.Errorf("Handle returned an error: %v", err)
		return 0, nil, ""
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Body), &m)
	return r.StatusCode, m, r.Body
}

func resubmitReq(id, key string) eventReq {
	return commerceReq("POST", "/inbox/"+id+"/resubmit", key)
}

func directCancel(runID, key string) eventReq {
	return commerceReq("POST", "/runs/"+runs.ProjectID(runID)+"/cancel", key)
}

// entryState is the state a discard under a fresh key finds the entry in:
// "waiting" (the discard won it), or the state it names when it lost.
func entryState(t *testing.T, f *fixture, id, key string) string {
	t.Helper()
	st, m, body := post(t, f, "discard", commerceReq("POST", "/inbox/"+id+"/discard", key))
	if st == 200 && m["status"] == "discarded" {
		return "waiting"
	}
	d, _ := m["details"].(map[string]any)
	if st != 409 || m["error"] != CodeInboxEntryDecided || d["id"] != id {
		t.Fatalf("the discard of %s: %d %s", id, st, body)
	}
	s, _ := d["state"].(string)
	return s
}

// TestInboxResubmissionRetriedAfterItsCancelLanded: a resubmission whose
// cancel landed but whose answer was lost (5xx) is retried with its
// Idempotency-Key: the run is cancelled by its own write, so the retry
// answers the 200 the first attempt earned, the write does not run again,
// and the entry is resubmitted. A direct cancel afterwards is refused.
func TestInboxResubmissionRetriedAfterItsCancelLanded(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs, _, spy := retryHost(t, e)
		run, id := waitingCancel(t, f, rs, "queued own")
		spy.mu.Lock()
		spy.lose = true
		spy.mu.Unlock()
		if st, _, body := post(t, f, "resubmission", resubmitReq(id, "resubmit own")); st < 500 {
			t.Fatalf("the resubmission whose cancel's answer was lost: %d %s", st, body)
		}
		first := spy.reset()
		got, err := rs.Get(context.Background(), run.ID)
		if err != nil || got.Status != runs.StatusCancelled || got.CancelledBy == "" || got.CancelledBy != first["resubmission"] {
			t.Fatalf("the run after the lost answer: %+v %v (cancels landed: %v)", got, err, first)
		}
		if st, m, body := post(t, f, "resubmission", resubmitReq(id, "resubmit own")); st != 200 || m["status"] != "cancelled" || m["runId"] != run.ID {
			t.Fatalf("the retried resubmission after its own cancel landed: %d %s, want 200 cancelled", st, body)
		}
		if again := spy.reset(); len(again) != 0 {
			t.Fatalf("the retry ran the write again: %v", again)
		}
		if s := entryState(t, f, id, "discard after own"); s != "resubmitted" {
			t.Fatalf("the entry is %s, want resubmitted", s)
		}
		if st, m, body := post(t, f, "direct", directCancel(run.ID, "direct after own")); st != 409 || m["error"] != "run_terminal" {
			t.Fatalf("a direct cancel afterwards: %d %s", st, body)
		}
	})
}

// TestInboxResubmissionRetriedAfterAnotherCancelIsRunTerminal: another
// request cancelled the run between a resubmission's attempt and its retry;
// the retry is 409 run_terminal, never a 200 claiming a cancel it did not
// make, whether the first attempt lost its answer while it held the entry
// (its write never ran) or after it resubmitted it (its write found the run
// already cancelled and was refused run_terminal). The entry is resubmitted
// (moot: the run ended) and the run stays cancelled by the other request.
func TestInboxResubmissionRetriedAfterAnotherCancelIsRunTerminal(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs, l, spy := retryHost(t, e)
		ctx := context.Background()
		for _, held := range []bool{true, false} {
			run, id := waitingCancel(t, f, rs, fmt.Sprintf("queued other %v", held))
			key := fmt.Sprintf("resubmit other %v", held)
			req := resubmitReq(id, key)
			if held {
				// The take lands, its answer is lost: the entry is held,
				// nothing ran; then another request cancels the run.
				l.arm(inbox.Resubmitting, true)
				if st, _, body := post(t, f, "resubmission", req); st < 500 {
					t.Fatalf("held: the resubmission whose take's answer was lost: %d %s", st, body)
				}
				if st, m, body := post(t, f, "direct", directCancel(run.ID, "direct "+key)); st != 200 || m["status"] != "cancelled" {
					t.Fatalf("held: the direct cancel: %d %s", st, body)
				}
			} else {
				// Another request cancels the run; the resubmission, decided
				// against the run as it is now, is refused run_terminal and
				// resubmits the entry, and that answer is lost.
				if st, m, body := post(t, f, "direct", directCancel(run.ID, "direct "+key)); st != 200 || m["status"] != "cancelled" {
					t.Fatalf("resubmitted: the direct cancel: %d %s", st, body)
				}
				now, err := rs.Get(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				req.Headers["idempotency-decided-version"] = itoa64(now.Version)
				l.arm(inbox.Resubmitted, true)
				if st, _, body := post(t, f, "resubmission", req); st < 500 {
					t.Fatalf("resubmitted: the resubmission whose finish's answer was lost: %d %s", st, body)
				}
			}
			landed := spy.reset()
			if len(landed) != 1 || landed["direct"] == "" {
				t.Fatalf("held %v: cancels that landed: %v, want the direct one only", held, landed)
			}
			if st, m, body := post(t, f, "resubmission", req); st != 409 || m["error"] != "run_terminal" {
				t.Fatalf("held %v: the retried resubmission after another request cancelled the run: %d %s, want 409 run_terminal", held, st, body)
			}
			got, err := rs.Get(ctx, run.ID)
			if err != nil || got.Status != runs.StatusCancelled || got.CancelledBy != landed["direct"] {
				t.Fatalf("held %v: the run: %+v %v, want cancelled by the direct cancel", held, got, err)
			}
			if again := spy.reset(); len(again) != 0 {
				t.Fatalf("held %v: the retry moved the run: %v", held, again)
			}
			if s := entryState(t, f, id, "discard after "+key); s != "resubmitted" {
				t.Fatalf("held %v: the entry is %s, want resubmitted", held, s)
			}
		}
	})
}

// TestInboxResubmissionRetryRacesADirectCancel: a resubmission whose take
// landed and whose answer was lost (the entry held, its write not run) is
// retried while another request cancels the run directly. Exactly one of
// the two answers 200 cancelled, and it is the one whose write the run
// records as its canceller; the other is refused 409 (run_terminal, or the
// resubmission's stale decision with the entry handed back to wait). The
// racing rounds are followed by the interleaving they rarely hit on an
// emulator: the direct cancel lands between the retry's read of the run
// and its own cancel's write.
func TestInboxResubmissionRetryRacesADirectCancel(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs, l, spy := retryHost(t, e)
		const rounds = 6
		wins := map[string]int{}
		for round := 0; round < rounds; round++ {
			run, id := waitingCancel(t, f, rs, fmt.Sprintf("queued race %d", round))
			resub := resubmitReq(id, fmt.Sprintf("resubmit race %d", round))
			l.arm(inbox.Resubmitting, true)
			if st, _, body := post(t, f, "resubmission", resub); st < 500 {
				t.Fatalf("round %d: the resubmission whose take's answer was lost: %d %s", round, st, body)
			}
			type answer struct {
				st   int
				m    map[string]any
				body string
			}
			var ans [2]answer
			who := [2]string{"resubmission", "direct"}
			reqs := [2]eventReq{resub, directCancel(run.ID, fmt.Sprintf("direct race %d", round))}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range reqs {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					st, m, body := post(t, f, who[i], reqs[i])
					ans[i] = answer{st, m, body}
				}(i)
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, a := range ans {
				if a.st == 200 && a.m["status"] == "cancelled" {
					if winner >= 0 {
						t.Fatalf("round %d: both answered 200: %s / %s", round, ans[0].body, ans[1].body)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: neither answered 200: %s / %s", round, ans[0].body, ans[1].body)
			}
			wins[who[winner]]++
			landed := spy.reset()
			got, err := rs.Get(context.Background(), run.ID)
			if err != nil || got.Status != runs.StatusCancelled {
				t.Fatalf("round %d: the run: %+v %v", round, got, err)
			}
			if len(landed) != 1 || landed[who[winner]] == "" || got.CancelledBy != landed[who[winner]] {
				t.Fatalf("round %d: %s answered 200, but the cancels that landed are %v and the run records %q", round, who[winner], landed, got.CancelledBy)
			}
			loser := ans[1-winner]
			state := entryState(t, f, id, fmt.Sprintf("discard race %d", round))
			switch {
			case loser.st == 409 && loser.m["error"] == "run_terminal":
				if state != "resubmitted" {
					t.Fatalf("round %d: %s lost with run_terminal; the entry is %s", round, who[1-winner], state)
				}
			case winner == 1 && loser.st == 409 && loser.m["error"] == decided.CodeStale:
				if state != "waiting" {
					t.Fatalf("round %d: the resubmission was refused stale; the entry is %s, want waiting", round, state)
				}
			default:
				t.Fatalf("round %d: %s won; %s answered %d %s", round, who[winner], who[1-winner], loser.st, loser.body)
			}
		}
		t.Logf("winners over %d rounds: %v", rounds, wins)

		run, id := waitingCancel(t, f, rs, "queued between")
		resub := resubmitReq(id, "resubmit between")
		l.arm(inbox.Resubmitting, true)
		if st, _, body := post(t, f, "resubmission", resub); st < 500 {
			t.Fatalf("between: the resubmission whose take's answer was lost: %d %s", st, body)
		}
		var direct struct {
			st   int
			m    map[string]any
			body string
		}
		spy.mu.Lock()
		spy.before = func(who string) {
			if who != "resubmission" {
				return
			}
			spy.mu.Lock()
			spy.before = nil
			spy.mu.Unlock()
			direct.st, direct.m, direct.body = post(t, f, "direct", directCancel(run.ID, "direct between"))
		}
		spy.mu.Unlock()
		st, m, body := post(t, f, "resubmission", resub)
		if direct.st != 200 || direct.m["status"] != "cancelled" {
			t.Fatalf("between: the direct cancel: %d %s", direct.st, direct.body)
		}
		if st != 409 || m["error"] != decided.CodeStale {
			t.Fatalf("between: the retried resubmission whose write lost to the direct cancel: %d %s, want 409 %s", st, body, decided.CodeStale)
		}
		landed := spy.reset()
		got, err := rs.Get(context.Background(), run.ID)
		if err != nil || got.Status != runs.StatusCancelled || len(landed) != 1 || got.CancelledBy != landed["direct"] || landed["direct"] == "" {
			t.Fatalf("between: the run %+v %v, cancels landed %v", got, err, landed)
		}
		if s := entryState(t, f, id, "discard between"); s != "waiting" {
			t.Fatalf("between: the entry is %s, want waiting (handed back)", s)
		}
	})
}

// replayedCancel is a RunStore whose next Cancel applies and then answers
// what the SDK's retry of that write would: the status conflict of the run
// it just cancelled (the write's first answer was lost).
type replayedCancel struct {
	*runs.MemRuns
	lose bool
}

func (s *replayedCancel) Cancel(ctx context.Context, id string, from []runs.Status, by, reason string, now time.Time) (runs.Run, error) {
	r, err := s.MemRuns.Cancel(ctx, id, from, by, reason, now)
	if err != nil || !s.lose {
		return r, err
	}
	s.lose = false
	return s.MemRuns.Cancel(ctx, id, from, by, reason, now)
}

// TestKeylessCancelLostAnswer: a cancel without an Idempotency-Key whose
// write applied and whose answer was lost (the SDK's retry finds the run
// cancelled) is answered 200 cancelled, its own cancel, not 409
// run_terminal; another cancel without a key is still 409.
func TestKeylessCancelLostAnswer(t *testing.T) {
	rs := &replayedCancel{MemRuns: runs.NewMemRuns()}
	f := hostOf(t, rs, idem.Config{}, nil)
	f.runs = rs.MemRuns
	r := f.newRun(t, "acme")
	rs.lose = true
	if resp, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(r.ID)+"/cancel", "acme", "", `{}`)); resp.StatusCode != 200 || m["status"] != "cancelled" {
		t.Fatalf("the cancel whose answer was lost: %d %s", resp.StatusCode, resp.Body)
	}
	if resp, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(r.ID)+"/cancel", "acme", "", `{}`)); resp.StatusCode != 409 || m["error"] != "run_terminal" {
		t.Fatalf("another cancel: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestKeylessCreateLostAnswer: a createRun without an Idempotency-Key
// whose run write applied and whose answer was lost (the SDK's retry finds
// the run there) is answered 201 for that run, on every engine: answered
// 500, its caller would retry it into a second run. The same holds for a
// keyless retry of a failed run, which is also linked from it.
func TestKeylessCreateLostAnswer(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		f := hostOf(t, rs, idem.Config{}, nil)
		faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
		if r.StatusCode != 201 || faults.Pending() != 0 {
			t.Fatalf("the create whose answer was lost: %d %s (fault armed still: %v)", r.StatusCode, r.Body, faults.Pending() != 0)
		}
		id, _ := m["runId"].(string)
		if got, err := rs.Get(context.Background(), id); err != nil || got.Tenant != "acme" {
			t.Fatalf("the run it answered: %+v %v", got, err)
		}
		failed := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		if err := rs.Create(context.Background(), failed); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(context.Background(), failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", time.Now()); err != nil {
			t.Fatal(err)
		}
		faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		r, m = f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", "acme", "", ``))
		if r.StatusCode != 201 || faults.Pending() != 0 {
			t.Fatalf("the retry whose answer was lost: %d %s", r.StatusCode, r.Body)
		}
		if got, err := rs.Get(context.Background(), failed.ID); err != nil || !slices.Contains(got.Retries, m["runId"].(string)) {
			t.Fatalf("the failed run's retries: %v %v, want %v", got.Retries, err, m["runId"])
		}
	})
}
