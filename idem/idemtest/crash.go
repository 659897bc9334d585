package idemtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/crashpoint"
)

// Crash points of Layer 1, each injected by name: the simulated process
// dies there (its goroutine stops and none of its later store calls reach
// the store, as if it had been killed).
const (
	// CrashAfterClaim: the claim is written, the handler has not run.
	CrashAfterClaim = "after-claim"
	// CrashAfterHandler: the handler did its work (registered its
	// transactional writes) and the process dies before it returns.
	CrashAfterHandler = "after-handler"
	// CrashBeforeCompletion: the handler returned; the completion is never
	// sent.
	CrashBeforeCompletion = "before-completion"
	// CrashDuringCompletion: the completion is applied; the process dies
	// before it hears the answer.
	CrashDuringCompletion = "during-completion"
	// CrashDuringRelease: the handler failed retryably; the release is
	// applied and the process dies before it hears the answer.
	CrashDuringRelease = "during-release"
)

// CrashPoints lists the crash points in the order of a request's steps.
var CrashPoints = []string{CrashAfterClaim, CrashAfterHandler, CrashBeforeCompletion, CrashDuringCompletion, CrashDuringRelease}

// Crash phases (see package crashpoint): which attempt dies.
const (
	PhaseFirst    = crashpoint.PhaseFirst
	PhaseRetry    = crashpoint.PhaseRetry
	PhaseTakeover = crashpoint.PhaseTakeover
)

// CrashPhases lists the phases.
var CrashPhases = crashpoint.Phases

// dyingStore is one simulated process's view of the store: at its crash
// point the process dies, and from then on none of its calls reach the
// store (each blocks until the test ends).
type dyingStore struct {
	idem.Store
	*crashpoint.Process
}

func (d *dyingStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	if d.Dead() {
		return idem.ClaimResult{}, d.Die()
	}
	r, err := d.Store.Claim(ctx, rec, now)
	if err == nil && d.Point == CrashAfterClaim && r.Decision != idem.Exists {
		return idem.ClaimResult{}, d.Die()
	}
	return r, err
}

func (d *dyingStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if d.Dead() || d.Point == CrashBeforeCompletion {
		return d.Die()
	}
	err := d.Store.Complete(ctx, claim, out, now)
	if d.Point == CrashDuringCompletion {
		return d.Die()
	}
	return err
}

func (d *dyingStore) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	if d.Dead() {
		return d.Die()
	}
	err := d.Store.Release(ctx, claim, now)
	if d.Point == CrashDuringRelease {
		return d.Die()
	}
	return err
}

func (d *dyingStore) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	if d.Dead() {
		return d.Die()
	}
	return d.Store.Renew(ctx, id, owner, leaseExpires, now)
}

func (d *dyingStore) Delete(ctx context.Context, id, owner string, now time.Time) error {
	if d.Dead() {
		return d.Die()
	}
	return d.Store.Delete(ctx, id, owner, now)
}

func (d *dyingStore) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	if d.Dead() {
		return idem.Record{}, false, d.Die()
	}
	return d.Store.Get(ctx, id, now)
}

// stallingStore is one process's view of the store that freezes (a
// Lambda invocation paused, a long collection) as it sends its
// completion: at is closed then, and the call reaches the store only once
// resume is closed, as it was sent.
type stallingStore struct {
	idem.Store
	at, resume chan struct{}
}

func (s *stallingStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	close(s.at)
	<-s.resume
	return s.Store.Complete(ctx, claim, out, now)
}

// stalledOwnerCase: a process is frozen holding its claim, its work done
// and its completion on the way, past its lease; a second process takes
// the claim over and does the work, and is frozen the same way; then the
// first thaws and its completion reaches the store while the second still
// holds the claim. That completion must be refused (the first process's
// Once fails with ErrLeaseLost): only the process holding the claim
// records its answer, with its transactional writes; the second then
// completes, and its answer is the one every later call replays. (A
// crash point's dead process never comes back: without this case a
// takeover that left the previous owner able to write, the same owner
// token on both, say, passed the matrix; RED_TEAM 579.)
func stalledOwnerCase(t *testing.T, h Harness) {
	store := h.NewStore(t)
	now := clock.System{}.Now
	if h.Now != nil {
		now = h.Now
	}
	clk := clock.NewManual(now().UTC())
	key := fmt.Sprintf("crash-stalled-owner-%d", clk.Now().UnixNano())
	g := func(s idem.Store) *idem.Guard { return crashGuard(t, s, clk) }
	name := func(n int) string { return fmt.Sprintf("%s-exec-%d", key, n) }
	work := func(n int) func(ctx context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			if h.TxWrites != nil {
				if err := idem.Transact(ctx, h.TxWrites.Put(t, store, name(n))); err != nil {
					return nil, err
				}
			}
			return fmt.Appendf(nil, `{"execution":%d}`, n), nil
		}
	}
	call := func(g *idem.Guard, n int) ([]byte, bool, error) {
		return g.Once(context.Background(), idem.Work{Operation: "crash-matrix", Key: key, Payload: []byte(`{"order":42}`), Run: work(n)})
	}
	type result struct {
		v   []byte
		ran bool
		err error
	}
	type proc struct {
		s    *stallingStore
		done chan result
	}
	var thaw []chan struct{}
	var thawOnce sync.Once
	t.Cleanup(func() { // a failed case lets its frozen processes go
		thawOnce.Do(func() {
			for _, c := range thaw {
				select {
				case <-c:
				default:
					close(c)
				}
			}
		})
	})
	// freeze starts process n and returns once it is frozen sending its
	// completion.
	freeze := func(n int) *proc {
		p := &proc{s: &stallingStore{Store: store, at: make(chan struct{}), resume: make(chan struct{})}, done: make(chan result, 1)}
		thaw = append(thaw, p.s.resume)
		gd := g(p.s)
		go func() {
			v, ran, err := call(gd, n)
			p.done <- result{v, ran, err}
		}()
		select {
		case <-p.s.at:
		case r := <-p.done:
			t.Fatalf("process %d ended before its completion: %s ran=%t err=%v", n, r.v, r.ran, r.err)
		case <-time.After(time.Minute): // a safety net against a hung test, not a verdict on speed
			t.Fatalf("process %d never sent its completion", n)
		}
		return p
	}
	wait := func(p *proc) result {
		select {
		case r := <-p.done:
			return r
		case <-time.After(time.Minute):
			t.Fatal("a thawed process never returned")
			return result{}
		}
	}

	first := freeze(1)
	clk.Advance(crashLease + time.Minute)
	second := freeze(2)
	close(first.s.resume)
	if r := wait(first); !errors.Is(r.err, idem.ErrLeaseLost) {
		t.Fatalf("the completion of the process whose claim was taken over: %s ran=%t err=%v, want ErrLeaseLost", r.v, r.ran, r.err)
	}
	close(second.s.resume)
	r := wait(second)
	if r.err != nil || !r.ran || string(r.v) != `{"execution":2}` {
		t.Fatalf("the completion of the process holding the claim: %s ran=%t err=%v, want its own answer", r.v, r.ran, r.err)
	}
	v, ran, err := call(g(store), 3)
	if err != nil || ran || string(v) != string(r.v) {
		t.Fatalf("the replay: %s ran=%t err=%v, want %s replayed", v, ran, err, r.v)
	}
	if h.TxWrites != nil {
		if h.TxWrites.Exists(t, store, name(1)) || !h.TxWrites.Exists(t, store, name(2)) {
			t.Fatalf("committed: the taken-over process's writes %t, the owner's %t; want only the owner's",
				h.TxWrites.Exists(t, store, name(1)), h.TxWrites.Exists(t, store, name(2)))
		}
	}
}

// crashLease is the matrix's claim lease (idem.MinLease).
const crashLease = idem.MinLease

// RunCrashMatrix runs Layer 1's crash-point matrix against h's store:
// every crash point (CrashPoints) in every phase (CrashPhases), each
// injected by name, followed by recovery (the lease runs out on the
// injected clock and a healthy process retries until it gets the final
// answer) and a replay. It asserts:
//
//   - with transactional writes (h.TxWrites), the work commits exactly
//     once at every point: a process that dies before its completion
//     commits nothing, and one that dies after it leaves the answer a
//     retry replays;
//   - without them, the work's side effect happens once at every point
//     but two: a process that dies after the handler did its work and
//     before the completion landed (after-handler, before-completion)
//     cannot be told from one that never ran, so the takeover runs the
//     handler again (a second side effect). That is Layer 1's documented
//     limit; the ledger (Layer 2) or transactional writes close it;
//   - the final answer is recorded once and replayed byte for byte, and
//     never to a call whose process died.
func RunCrashMatrix(t *testing.T, h Harness) {
	if h.NewStore == nil {
		t.Fatal("idemtest: Harness.NewStore is required")
	}
	for _, phase := range CrashPhases {
		for _, point := range CrashPoints {
			t.Run(phase+"/"+point, func(t *testing.T) { crashCase(t, h, phase, point) })
		}
	}
	t.Run(PhaseTakeover+"/stalled-owner-resumes", func(t *testing.T) { stalledOwnerCase(t, h) })
}

func crashCase(t *testing.T, h Harness, phase, point string) {
	store := h.NewStore(t)
	procs := crashpoint.NewGroup(t)
	now := clock.System{}.Now
	if h.Now != nil {
		now = h.Now
	}
	// The matrix's clock: Now moves only when advanced; Sleep advances it
	// (a waiting duplicate's poll never sleeps for real); the heartbeat
	// ticker is the system's, whose period (a third of the lease) never
	// elapses in a test.
	clk := clock.NewManual(now().UTC())
	key := fmt.Sprintf("crash-%s-%s-%d", phase, point, clk.Now().UnixNano())

	var executions, committedNoTx atomic.Int32
	var names []string
	var namesMu sync.Mutex
	// work is the request's handler in one process: it does the work (a
	// transactional write named after its execution, or a side effect
	// counted at once without transactions), then dies if told to.
	work := func(d *dyingStore, fail bool) func(ctx context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			n := executions.Add(1)
			if fail {
				return nil, errors.New("a retryable failure")
			}
			if h.TxWrites != nil {
				name := fmt.Sprintf("%s-exec-%d", key, n)
				namesMu.Lock()
				names = append(names, name)
				namesMu.Unlock()
				if err := idem.Transact(ctx, h.TxWrites.Put(t, store, name)); err != nil {
					return nil, err
				}
			} else {
				committedNoTx.Add(1)
			}
			if d != nil && d.Point == CrashAfterHandler {
				return nil, d.Die()
			}
			return fmt.Appendf(nil, `{"execution":%d}`, n), nil
		}
	}
	process := func(s idem.Store) *idem.Guard { return crashGuard(t, s, clk) }
	call := func(g *idem.Guard, run func(context.Context) ([]byte, error)) ([]byte, bool, error) {
		return g.Once(context.Background(), idem.Work{Operation: "crash-matrix", Key: key, Payload: []byte(`{"order":42}`), Run: run})
	}
	// crash runs one process that dies at point, and returns once it has.
	crash := func(point string) {
		procs.Crash(point, func(p *crashpoint.Process) func() {
			d := &dyingStore{Store: store, Process: p}
			g := process(d)
			return func() { _, _, _ = call(g, work(d, point == CrashDuringRelease)) }
		})
	}

	switch phase {
	case PhaseRetry:
		if _, ran, err := call(process(store), work(nil, true)); err == nil || !ran {
			t.Fatalf("the first attempt's retryable failure: ran=%t err=%v", ran, err)
		}
	case PhaseTakeover:
		crash(CrashAfterClaim)
		clk.Advance(crashLease + time.Minute)
	}
	crash(point)

	// Recovery: a healthy process retries; an in-flight answer means a
	// dead process's lease is still running, which the clock ends.
	var first []byte
	for try := 0; ; try++ {
		v, ran, err := call(process(store), work(nil, false))
		if err == nil {
			if !ran && point != CrashDuringCompletion {
				t.Fatalf("recovery replayed %s: no attempt completed before it", v)
			}
			if ran && point == CrashDuringCompletion {
				t.Fatalf("recovery ran the work again: the completion applied at %s was not found", point)
			}
			first = v
			break
		}
		if point == CrashDuringRelease || point == CrashDuringCompletion {
			// The dead process's last write applied: the record is
			// released (or final), with no lease to wait out.
			t.Fatalf("recovery after %s: %v; the write applied before the process died was not found", point, err)
		}
		if try == 5 || !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("recovery try %d: %v", try, err)
		}
		clk.Advance(crashLease + time.Minute)
	}
	v, ran, err := call(process(store), work(nil, false))
	if err != nil || ran || string(v) != string(first) {
		t.Fatalf("the replay after recovery: %s ran=%t err=%v, want %s replayed", v, ran, err, first)
	}

	if h.TxWrites != nil {
		committed := 0
		namesMu.Lock()
		for _, n := range names {
			if h.TxWrites.Exists(t, store, n) {
				committed++
			}
		}
		namesMu.Unlock()
		if committed != 1 {
			t.Fatalf("%d executions committed (of %d run), want exactly 1", committed, executions.Load())
		}
		return
	}
	want := int32(1)
	if point == CrashAfterHandler || point == CrashBeforeCompletion {
		want = 2 // Layer 1's documented limit without transactional writes
	}
	if got := committedNoTx.Load(); got != want {
		t.Fatalf("%d side effects, want %d", got, want)
	}
}

// crashGuard is one process of a crash case: a Guard on s with the
// matrix's lease, no wait for an owner in flight, and clk as its clock.
func crashGuard(t *testing.T, s idem.Store, clk *clock.Manual) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{Store: s, Tenant: idem.SingleTenant("crash"), Lease: crashLease, Wait: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Test:   idem.TestConfig{Clock: clk.SleepAdvances()}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
