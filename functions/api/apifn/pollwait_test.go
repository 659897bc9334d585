package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// countingRuns counts the run reads (Get: one GetItem each on DynamoDB).
type countingRuns struct {
	*runs.MemRuns
	gets atomic.Int64
}

func (c *countingRuns) Get(ctx context.Context, id string) (runs.Run, error) {
	c.gets.Add(1)
	return c.MemRuns.Get(ctx, id)
}

// pollRig is the api handler over counted runs in memory whose sleeps are
// recorded, never slept; onSleep, when set, runs at each sleep (its
// 1-based number) before it returns; now, when set, is the handler's
// clock (else the system's).
type pollRig struct {
	f       *fixture
	mem     *runs.MemRuns
	counted *countingRuns
	sleeps  []time.Duration
	onSleep func(n int)
	now     func() time.Time
}

func newPollRig(t *testing.T, maxWait time.Duration) *pollRig {
	t.Helper()
	p := &pollRig{mem: runs.NewMemRuns()}
	p.counted = &countingRuns{MemRuns: p.mem}
	p.f = hostOf(t, p.counted, idem.Config{}, func(_ *fixture, c *Config) {
		c.PollMaxWait = maxWait
		c.Test = TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time {
			if p.now != nil {
				return p.now()
			}
			return time.Now()
		}, SleepFunc: func(ctx context.Context, d time.Duration) error {
			p.sleeps = append(p.sleeps, d)
			if p.onSleep != nil {
				p.onSleep(len(p.sleeps))
			}
			return ctx.Err()
		}}}
	})
	return p
}

// running stores a running run of tenant acme (events: run.started at 0).
func (p *pollRig) running(t *testing.T) runs.Run {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), t0)
	if err := p.mem.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	running, err := p.mem.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return running
}

// poll asks pollRunEvents of r with query under ctx, and returns the
// answer, its decoded body and the run reads it cost.
func (p *pollRig) poll(t *testing.T, ctx context.Context, method string, r runs.Run, query string) (int, map[string]any, int64) {
	t.Helper()
	p.sleeps = nil
	before := p.counted.gets.Load()
	e := eventsReq("/runs/"+runs.ProjectID(r.ID)+"/events/poll", "acme", query, "")
	e.RequestContext.HTTP.Method = method
	resp, err := p.f.h.Handle(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(resp.Body), &m)
	return resp.StatusCode, m, p.counted.gets.Load() - before
}

func total(ds []time.Duration) (s time.Duration) {
	for _, d := range ds {
		s += d
	}
	return s
}

func eventTypes(m map[string]any) []string {
	evs, _ := m["events"].([]any)
	out := []string{}
	for _, e := range evs {
		typ, _ := e.(map[string]any)["type"].(string)
		out = append(out, typ)
	}
	return out
}

// TestPollWaitsForAnEvent: a poll whose cursor is at the end of a live
// run's log waits, and an event appended during the wait is its answer,
// as soon as the next re-read finds it (events.md §Poll: timeout is the
// seconds to wait for new events).
func TestPollWaitsForAnEvent(t *testing.T) {
	p := newPollRig(t, 0)
	r := p.running(t)
	p.onSleep = func(n int) {
		if n != 2 {
			return
		}
		ev := runs.LogEvent{Type: runs.EventNodeStarted, NodeID: "a", At: t0.Add(2 * time.Second), Payload: json.RawMessage(`{"nodeId":"a","typeId":"x"}`)}
		if _, err := p.mem.AppendLog(context.Background(), r.ID, r.Fence(), []runs.LogEvent{ev}, t0.Add(2*time.Second)); err != nil {
			t.Error(err)
		}
	}
	st, m, reads := p.poll(t, context.Background(), http.MethodGet, r, "afterSequence=0")
	if got := eventTypes(m); st != 200 || len(got) != 1 || got[0] != runs.EventNodeStarted || m["lastSequence"] != float64(1) || m["isTerminal"] != false {
		t.Fatalf("poll: %d %v; want 200 with the node.started appended during the wait", st, m)
	}
	if len(p.sleeps) != 2 || reads != 3 {
		t.Fatalf("%d sleeps %v, %d reads; want the answer at the re-read after the second pause (2 sleeps, 3 reads)", len(p.sleeps), p.sleeps, reads)
	}
}

// TestPollTerminalEndsTheWait: a run that ends during the wait ends it,
// with its terminal event, and also when the cursor is already past that
// event (no events, isTerminal true: nothing more will come).
func TestPollTerminalEndsTheWait(t *testing.T) {
	for _, c := range []struct {
		cursor string
		want   []string
	}{{"0", []string{EventRunCompleted}}, {"7", []string{}}} {
		p := newPollRig(t, 0)
		r := p.running(t)
		p.onSleep = func(n int) {
			if n == 3 {
				if _, err := p.mem.Transition(context.Background(), r.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", t0.Add(3*time.Second)); err != nil {
					t.Error(err)
				}
			}
		}
		st, m, reads := p.poll(t, context.Background(), http.MethodGet, r, "afterSequence="+c.cursor)
		if got := eventTypes(m); st != 200 || len(got) != len(c.want) || len(got) == 1 && got[0] != c.want[0] || m["isTerminal"] != true || m["status"] != "completed" {
			t.Fatalf("afterSequence=%s: %d %v; want 200, events %v, isTerminal", c.cursor, st, m, c.want)
		}
		if len(p.sleeps) != 3 || reads != 4 {
			t.Fatalf("afterSequence=%s: %d sleeps, %d reads; want 3 and 4", c.cursor, len(p.sleeps), reads)
		}
		// Once the run is terminal, the same poll answers at once.
		if st, _, reads := p.poll(t, context.Background(), http.MethodGet, r, "afterSequence=9"); st != 200 || len(p.sleeps) != 0 || reads != 1 {
			t.Fatalf("terminal run: %d after %d sleeps, %d reads; want 200 at once", st, len(p.sleeps), reads)
		}
	}
}

// TestPollTimeoutEndsTheWait pins the wait and its cost: with no event,
// a poll of a live run answers 200 with no events when its timeout is
// spent, capped by Config.PollMaxWait (default 20 s), after pauses of
// 250 ms, 500 ms, 1 s, then 2 s (the last one cut to the wait's end),
// reading the run once per pause plus once at the start: 4 reads for
// timeout=1, 6 for timeout=5, 14 for the default cap of 20 s (timeout
// absent: 30 s; or 60). An answer with events, and a HEAD, cost one read
// and no wait.
func TestPollTimeoutEndsTheWait(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		maxWait time.Duration
		query   string
		sleeps  []time.Duration
	}{
		{"timeout=1", 0, "afterSequence=0&timeout=1", []time.Duration{250 * ms, 500 * ms, 250 * ms}},
		{"timeout=5", 0, "afterSequence=0&timeout=5", []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second, 1250 * ms}},
		{"default timeout, default cap", 0, "afterSequence=0", nil},
		{"timeout=60, default cap", 0, "afterSequence=0&timeout=60", nil},
		{"timeout=60, cap 3 s", 3 * time.Second, "afterSequence=0&timeout=60", []time.Duration{250 * ms, 500 * ms, time.Second, 1250 * ms}},
		{"no wait", -1, "afterSequence=0&timeout=60", []time.Duration{}},
		{"past the end", 0, "afterSequence=99999999999999999999&timeout=1", []time.Duration{250 * ms, 500 * ms, 250 * ms}},
	}
	capped := []time.Duration{250 * ms, 500 * ms, time.Second}
	for range 8 {
		capped = append(capped, 2*time.Second)
	}
	capped = append(capped, 2*time.Second, 250*ms) // 19.75 s, then 20 s
	for _, c := range cases {
		want := c.sleeps
		if want == nil {
			want = capped
		}
		p := newPollRig(t, c.maxWait)
		r := p.running(t)
		st, m, reads := p.poll(t, context.Background(), http.MethodGet, r, c.query)
		if evs, ok := m["events"].([]any); st != 200 || !ok || len(evs) != 0 || m["lastSequence"] != float64(0) || m["isTerminal"] != false || m["status"] != "running" {
			t.Errorf("%s: %d %v; want 200 with no events", c.name, st, m)
		}
		if len(p.sleeps) != len(want) || reads != int64(len(want)+1) {
			t.Errorf("%s: sleeps %v (%v), %d reads; want %v, %d reads", c.name, p.sleeps, total(p.sleeps), reads, want, len(want)+1)
			continue
		}
		for i := range want {
			if p.sleeps[i] != want[i] {
				t.Errorf("%s: sleeps %v, want %v", c.name, p.sleeps, want)
				break
			}
		}
	}
	if total(capped) != DefaultPollMaxWait || len(capped)+1 != 14 {
		t.Fatalf("the default cap's schedule: %v in %d reads", total(capped), len(capped)+1)
	}

	p := newPollRig(t, 0)
	r := p.running(t)
	for _, q := range []string{"", "afterSequence=0&timeout=60"} {
		method := http.MethodGet
		if q != "" {
			method = http.MethodHead
		}
		if st, _, reads := p.poll(t, context.Background(), method, r, q); st != 200 || len(p.sleeps) != 0 || reads != 1 {
			t.Errorf("%s ?%s: %d after %d sleeps, %d reads; want 200 at once, one read", method, q, st, len(p.sleeps), reads)
		}
	}
}

// TestPollWaitEndsBeforeTheDeadline: the wait ends 2 s before the
// request's deadline (a Lambda invocation's: behind an HTTP API 29 s at
// most), so the last read and the answer fit; a client that hangs up
// ends it with the 499 every route gives it.
func TestPollWaitEndsBeforeTheDeadline(t *testing.T) {
	p := newPollRig(t, 0)
	r := p.running(t)
	// The handler's clock moves only by its sleeps, from 5 s before the
	// request's deadline (an hour away on the system clock, so that a
	// slow machine neither shortens the wait nor ends the context).
	start := time.Now().Add(time.Hour)
	p.now = func() time.Time { return start.Add(total(p.sleeps)) }
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(5*time.Second))
	defer cancel()
	st, m, _ := p.poll(t, ctx, http.MethodGet, r, "afterSequence=0&timeout=30")
	if evs, _ := m["events"].([]any); st != 200 || len(evs) != 0 {
		t.Fatalf("%d %v; want 200 with no events", st, m)
	}
	if w := total(p.sleeps); w != 3*time.Second {
		t.Fatalf("waited %v (%v) under a 5 s deadline; want 3 s, the deadline less its 2 s margin", w, p.sleeps)
	}
	p.now = nil

	ctx, cancel = context.WithCancel(context.Background())
	p.onSleep = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	if st, m, reads := p.poll(t, ctx, http.MethodGet, r, "afterSequence=0"); st != idem.StatusClientClosed || reads != 2 {
		t.Fatalf("a hang-up during the wait: %d %v after %d reads; want %d after 2", st, m, reads, idem.StatusClientClosed)
	}
}
