package apifn

// The inbox's decisions raced and retried through the api handler, on
// memory and on every emulator: a waiting write is either discarded or
// resubmitted, never both; a decision whose answer was lost is answered
// consistently when retried with its Idempotency-Key.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// inboxHost is the api handler under the commerce policy, its runs, inbox
// and Layer-1 records in memory (e nil) or in e's tables; cfg, if set,
// adjusts the handler's Config before New.
func inboxHost(t *testing.T, e *dynamotest.Emulator, cfg func(*Config)) (*fixture, runs.RunStore) {
	t.Helper()
	rs, st := backendStores(t, e)
	return hostOf(t, rs, idem.Config{Policy: commerce.Policy, Store: st}, func(_ *fixture, c *Config) {
		if cfg != nil {
			cfg(c)
		}
	}), rs
}

// waitingCancel creates a running run of acme's and a cancel decided
// against its version 1 (before it started running), which is refused and
// waits in the caller's inbox; it returns the run and the entry's id.
func waitingCancel(t *testing.T, f *fixture, rs runs.RunStore, key string) (runs.Run, string) {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{"n":1}`), time.Now())
	if err := rs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, m := f.do(t, decidedCancel(r.ID, 1, key))
	d, _ := m["details"].(map[string]any)
	id, _ := d["inboxId"].(string)
	if resp.StatusCode != 409 || id == "" {
		t.Fatalf("the stale cancel: %d %s", resp.StatusCode, resp.Body)
	}
	return r, id
}

func runStatus(t *testing.T, rs runs.RunStore, id string) runs.Status {
	t.Helper()
	r, err := rs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// TestInboxDiscardAndResubmitRaceHasOneWinner: discards and resubmissions
// of one waiting write, each under its own key, race; exactly one answers
// 200. When a discard won, the write never ran (the run is still
// running); whichever won, every loser is told so: 409
// idemkit.inbox_entry_decided naming the entry and its state (discarded,
// resubmitting or resubmitted).
func TestInboxDiscardAndResubmitRaceHasOneWinner(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		const rounds, racers = 12, 8
		wins := map[string]int{}
		for round := 0; round < rounds; round++ {
			run, id := waitingCancel(t, f, rs, fmt.Sprintf("queued %d", round))
			type answer struct {
				verb   string
				status int
				body   map[string]any
				raw    string
			}
			answers := make([]answer, racers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < racers; i++ {
				verb := "discard"
				if (i+round)%2 == 1 {
					verb = "resubmit"
				}
				wg.Add(1)
				go func(i int, verb string) {
					defer wg.Done()
					<-start
					r, err := f.h.Handle(context.Background(), commerceReq("POST", "/inbox/"+id+"/"+verb, fmt.Sprintf("%s %d-%d", verb, round, i)))
					if err != nil {
						t.Errorf("Handle: %v", err)
						return
					}
					var m map[string]any
					_ = json.Unmarshal([]byte(r.Body), &m)
					answers[i] = answer{verb, r.StatusCode, m, r.Body}
				}(i, verb)
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, a := range answers {
				if a.status == 200 {
					if winner >= 0 {
						t.Fatalf("round %d: two decisions won one entry: %s %s and %s %s", round, answers[winner].verb, answers[winner].raw, a.verb, a.raw)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no decision won: %+v", round, answers)
			}
			w := answers[winner]
			wins[w.verb]++
			st := runStatus(t, rs, run.ID)
			switch w.verb {
			case "discard":
				if st != runs.StatusRunning || w.body["status"] != "discarded" {
					t.Fatalf("round %d: told discarded (%s), but the run is %s", round, w.raw, st)
				}
			case "resubmit":
				if st != runs.StatusCancelled || w.body["status"] != "cancelled" {
					t.Fatalf("round %d: the resubmission won (%s), the run is %s", round, w.raw, st)
				}
			}
			for i, a := range answers {
				if i == winner {
					continue
				}
				switch {
				case w.verb == "discard" && a.status == 409 && a.body["error"] == CodeInboxEntryDecided:
					if d, _ := a.body["details"].(map[string]any); d["state"] != "discarded" || d["id"] != id {
						t.Fatalf("round %d: the loser's details: %s", round, a.raw)
					}
				case w.verb == "resubmit" && a.status == 409 && a.body["error"] == CodeInboxEntryDecided:
					d, _ := a.body["details"].(map[string]any)
					if s := d["state"]; s != "resubmitting" && s != "resubmitted" || d["id"] != id {
						t.Fatalf("round %d: the loser's details: %s", round, a.raw)
					}
				default:
					t.Fatalf("round %d: %s won; a %s got %d %s", round, w.verb, a.verb, a.status, a.raw)
				}
			}
			if es := listInbox(t, f); len(es) != 0 {
				t.Fatalf("round %d: the decided entry is still listed: %v", round, es)
			}
		}
		t.Logf("winners over %d rounds: %v", rounds, wins)
	})
}

func listInbox(t *testing.T, f *fixture) []any {
	t.Helper()
	r, m := f.do(t, commerceReq("GET", "/inbox", ""))
	if r.StatusCode != 200 {
		t.Fatalf("GET /inbox: %d %s", r.StatusCode, r.Body)
	}
	es, _ := m["entries"].([]any)
	return es
}

// lossy is an inbox whose next write of one kind fails: after it applied
// (its answer lost on the way back) or before (it never landed).
type lossy struct {
	inbox.Store
	mu      sync.Mutex
	to      inbox.State // the Decide to fail ("" for Keep)
	applied bool
	armed   bool
}

var errLost = errors.New("test: the store's answer was lost")

func (l *lossy) arm(to inbox.State, applied bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.to, l.applied, l.armed = to, applied, true
}

func (l *lossy) fire(to inbox.State) (fire, applied bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed && l.to == to {
		l.armed = false
		return true, l.applied
	}
	return false, false
}

func (l *lossy) Decide(ctx context.Context, tenant, id string, to inbox.State, by string, now time.Time) (inbox.Entry, error) {
	fire, applied := l.fire(to)
	if fire && !applied {
		return inbox.Entry{}, errLost
	}
	e, err := l.Store.Decide(ctx, tenant, id, to, by, now)
	if fire {
		return inbox.Entry{}, errLost
	}
	return e, err
}

// TestInboxDecisionRetriedAfterLostAnswer: a discard or resubmission whose
// compare-and-set landed (or did not) but whose answer was lost fails
// (5xx, nothing recorded by Layer 1); its retry with the same
// Idempotency-Key answers as the first would have: the discard is
// "discarded" and the write never ran, the resubmission "cancelled" with
// the write run once and the entry resubmitted; another request is told
// what happened.
func TestInboxDecisionRetriedAfterLostAnswer(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		var l *lossy
		f, rs := inboxHost(t, e, func(c *Config) {
			base, err := defaultInbox(c.Runs)
			if err != nil {
				t.Fatal(err)
			}
			l = &lossy{Store: base}
			c.Inbox = l
		})
		post := func(id, verb, key string) (int, map[string]any, string) {
			t.Helper()
			r, m := f.do(t, commerceReq("POST", "/inbox/"+id+"/"+verb, key))
			return r.StatusCode, m, r.Body
		}
		for _, applied := range []bool{true, false} {
			// Discard.
			run, id := waitingCancel(t, f, rs, fmt.Sprintf("queued d %v", applied))
			l.arm(inbox.Discarded, applied)
			if st, _, body := post(id, "discard", fmt.Sprintf("discard %v", applied)); st < 500 {
				t.Fatalf("applied %v: the discard whose answer was lost: %d %s", applied, st, body)
			}
			if st, m, body := post(id, "discard", fmt.Sprintf("discard %v", applied)); st != 200 || m["status"] != "discarded" {
				t.Fatalf("applied %v: the retried discard: %d %s", applied, st, body)
			}
			if st, m, body := post(id, "resubmit", fmt.Sprintf("resubmit after discard %v", applied)); st != 409 || m["error"] != CodeInboxEntryDecided ||
				m["details"].(map[string]any)["state"] != "discarded" || runStatus(t, rs, run.ID) != runs.StatusRunning {
				t.Fatalf("applied %v: a resubmission after the discard: %d %s (run %s)", applied, st, body, runStatus(t, rs, run.ID))
			}
			// Resubmit: the take lost, then the finish lost.
			for _, to := range []inbox.State{inbox.Resubmitting, inbox.Resubmitted} {
				run, id := waitingCancel(t, f, rs, fmt.Sprintf("queued %s %v", to, applied))
				key := fmt.Sprintf("resubmit %s %v", to, applied)
				l.arm(to, applied)
				if st, _, body := post(id, "resubmit", key); st < 500 {
					t.Fatalf("%s applied %v: the resubmission whose answer was lost: %d %s", to, applied, st, body)
				}
				if st, m, body := post(id, "resubmit", key); st != 200 || m["status"] != "cancelled" || m["runId"] != run.ID {
					t.Fatalf("%s applied %v: the retried resubmission: %d %s", to, applied, st, body)
				}
				if runStatus(t, rs, run.ID) != runs.StatusCancelled {
					t.Fatalf("%s applied %v: the run is %s", to, applied, runStatus(t, rs, run.ID))
				}
				st, m, body := post(id, "discard", "discard after "+key)
				d, _ := m["details"].(map[string]any)
				if st != 409 || m["error"] != CodeInboxEntryDecided || d["state"] != "resubmitted" {
					t.Fatalf("%s applied %v: a discard after the resubmission: %d %s", to, applied, st, body)
				}
				if es := listInbox(t, f); len(es) != 0 {
					t.Fatalf("%s applied %v: still listed: %v", to, applied, es)
				}
			}
		}
	})
}

// TestInboxResubmissionRefusedForItsOwnFaultLeavesTheEntryWaiting: a
// resubmission refused for its own fault (400: a decided version the run
// never had) runs nothing and hands the entry back: it is listed and a
// discard wins it.
func TestInboxResubmissionRefusedForItsOwnFaultLeavesTheEntryWaiting(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		run, id := waitingCancel(t, f, rs, "queued ahead")
		req := commerceReq("POST", "/inbox/"+id+"/resubmit", "resubmit ahead")
		req.Headers["idempotency-decided-version"] = "99"
		if r, _ := f.do(t, req); r.StatusCode != 400 {
			t.Fatalf("a version ahead: %d %s", r.StatusCode, r.Body)
		}
		if es := listInbox(t, f); len(es) != 1 {
			t.Fatalf("the entry after the refused resubmission: %v", es)
		}
		if r, m := f.do(t, commerceReq("POST", "/inbox/"+id+"/discard", "discard after ahead")); r.StatusCode != 200 || m["status"] != "discarded" {
			t.Fatalf("the discard: %d %s", r.StatusCode, r.Body)
		}
		if st := runStatus(t, rs, run.ID); st != runs.StatusRunning {
			t.Fatalf("the run is %s", st)
		}
	})
}

// TestInboxResubmissionKeepsTheCancelReason: a stale cancel with a reason
// waits in the inbox with that reason (GET /inbox lists it), keeps it when a
// resubmission is refused again, and the resubmission that runs cancels the
// run with it: run.cancelled carries it as payload.reason, as a direct
// cancel's does. A cancel without a reason waits, and cancels, without one.
func TestInboxResubmissionKeepsTheCancelReason(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		ctx := context.Background()
		cancelledPayload := func(id string) map[string]any {
			t.Helper()
			s := f.stream(t, eventsReq("/runs/"+runs.ProjectID(id)+"/events", "acme", "", ""))
			d := eventDoc(t, s.Frames[len(s.Frames)-1].Data)
			p, _ := d["payload"].(map[string]any)
			if d["type"] != EventRunCancelled {
				t.Fatalf("the last event: %v", d)
			}
			delete(p, "durationMs")
			return p
		}
		for _, c := range []struct {
			name, body, reason string
			refusedAgain       bool
		}{
			{"with a reason", `{"reason":"offline"}`, "offline", false},
			{"refused again", `{"reason":"offline ✓ \"twice\""}`, "offline ✓ \"twice\"", true},
			{"without a reason", ``, "", false},
			{"an empty body object", `{}`, "", false},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{"n":1}`), time.Now())
				if err := rs.Create(ctx, r); err != nil {
					t.Fatal(err)
				}
				if _, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
					t.Fatal(err)
				}
				req := decidedCancel(r.ID, 1, "queued "+c.name)
				if c.body != "" {
					req.Body, req.Headers["content-type"] = c.body, "application/json"
				}
				resp, m := f.do(t, req)
				d, _ := m["details"].(map[string]any)
				id, _ := d["inboxId"].(string)
				if resp.StatusCode != 409 || id == "" {
					t.Fatalf("the stale cancel: %d %s", resp.StatusCode, resp.Body)
				}
				listedReason := func() (any, bool) {
					t.Helper()
					for _, x := range listInbox(t, f) {
						if en := x.(map[string]any); en["id"] == id {
							v, ok := en["reason"]
							return v, ok
						}
					}
					t.Fatalf("entry %s is not listed", id)
					return nil, false
				}
				if v, ok := listedReason(); c.reason == "" && ok || c.reason != "" && v != c.reason {
					t.Fatalf("the listed entry's reason: %v (present %v), want %q", v, ok, c.reason)
				}
				if c.refusedAgain {
					// Another change of status after the refusal: the
					// resubmission is refused again, the entry waits with its
					// reason.
					if _, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusPending, "", time.Now()); err != nil {
						t.Fatal(err)
					}
					if resp, m := f.do(t, commerceReq("POST", "/inbox/"+id+"/resubmit", "resubmit first "+c.name)); resp.StatusCode != 409 || m["error"] != "idemkit.stale_decision" {
						t.Fatalf("the resubmission refused again: %d %s", resp.StatusCode, resp.Body)
					}
					if v, _ := listedReason(); v != c.reason {
						t.Fatalf("the reason after the refused resubmission: %v", v)
					}
				}
				if resp, m := f.do(t, commerceReq("POST", "/inbox/"+id+"/resubmit", "resubmit "+c.name)); resp.StatusCode != 200 || m["status"] != "cancelled" {
					t.Fatalf("the resubmission: %d %s", resp.StatusCode, resp.Body)
				}
				want := map[string]any{}
				if c.reason != "" {
					want["reason"] = c.reason
				}
				if p := cancelledPayload(r.ID); !reflect.DeepEqual(p, want) {
					t.Fatalf("run.cancelled's payload: %v, want %v", p, want)
				}
			})
		}
	})
}

// TestInboxDecidedEntryIsDecidedWhateverDecidedIt: once an entry is decided,
// a later resubmission or discard under a new key is 409
// idemkit.inbox_entry_decided with details {id, state}, whether the entry
// was discarded or resubmitted (never a 404 for one and a 409 for the
// other); a discarded write never runs. An id the inbox never held is 404.
func TestInboxDecidedEntryIsDecidedWhateverDecidedIt(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		for first, state := range map[string]string{"discard": "discarded", "resubmit": "resubmitted"} {
			run, id := waitingCancel(t, f, rs, "queued then "+first)
			if r, _ := f.do(t, commerceReq("POST", "/inbox/"+id+"/"+first, first+" first")); r.StatusCode != 200 {
				t.Fatalf("the first %s: %d %s", first, r.StatusCode, r.Body)
			}
			want := map[string]any{"id": id, "state": state}
			for _, verb := range []string{"resubmit", "discard"} {
				r, m := f.do(t, commerceReq("POST", "/inbox/"+id+"/"+verb, verb+" after "+first))
				if r.StatusCode != 409 || m["error"] != CodeInboxEntryDecided || m["message"] == "" ||
					!reflect.DeepEqual(m["details"], want) || len(m) != 3 {
					t.Fatalf("a %s after the %s: %d %s", verb, first, r.StatusCode, r.Body)
				}
			}
			st := runStatus(t, rs, run.ID)
			if first == "discard" && st != runs.StatusRunning || first == "resubmit" && st != runs.StatusCancelled {
				t.Fatalf("after the %s the run is %s", first, st)
			}
		}
		unknown := inbox.EntryID(idem.ClaimInfo{}, false)
		for _, verb := range []string{"resubmit", "discard"} {
			if r, m := f.do(t, commerceReq("POST", "/inbox/"+unknown+"/"+verb, verb+" unknown")); r.StatusCode != 404 || m["error"] != "not_found" {
				t.Fatalf("a %s of an unknown id: %d %s", verb, r.StatusCode, r.Body)
			}
		}
	})
}
