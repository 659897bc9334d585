package execfn

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// movingDeadline is a context whose deadline the test moves toward now as
// the fake clock's sleeps pass, so that a wait of a minute leaves the
// invocation a minute less without the test taking one.
type movingDeadline struct {
	context.Context
	mu sync.Mutex
	dl time.Time
}

func (m *movingDeadline) Deadline() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dl, true
}

func (m *movingDeadline) pass(d time.Duration) {
	m.mu.Lock()
	m.dl = m.dl.Add(-d)
	m.mu.Unlock()
}

// TestLastTryWaitKeepsLastTryMarginForTheExecution: the last try waits out
// an in-flight effect only when the execution after the wait still has
// LastTryMargin, its reserve, to run in: its execution ends endMargin
// before the deadline (executing), so the wait must fit in the remaining
// time less LastTryMargin and endMargin. Before, the wait was judged
// against LastTryMargin alone: the execution after it had endMargin less
// than its reserve, and with a LastTryMargin of endMargin or less (here
// 1 s) none at all: the last try waited a minute and then gave the run up
// without executing it. Now such a wait is not made (the run given up at
// once, as when the wait does not fit); one that leaves the reserve whole
// is made, and the run is delivered.
func TestLastTryWaitKeepsLastTryMarginForTheExecution(t *testing.T) {
	const margin = time.Second
	wait := time.Minute + retryAfterSlack // the crashed claim's lease (one minute) and the slack
	for _, tc := range []struct {
		name string
		left time.Duration // the invocation's time when the last try starts
		wait bool
	}{
		{"the execution would have less than LastTryMargin: no wait", wait + margin + endMargin/4, false},
		{"the execution keeps LastTryMargin: waited and delivered", wait + margin + endMargin + time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrashedFixture(t, -1)
			ctx := &movingDeadline{Context: context.Background(), dl: time.Now().Add(tc.left)}
			x := c.executor(1)
			x.LastTryMargin = margin
			sleep := c.clock.sleeper(&c.waits, &c.mu)
			x.Test.Clock = ledgertest.ClockFuncs{NowFunc: c.clock.Now, SleepFunc: func(sctx context.Context, d time.Duration) error {
				ctx.pass(d)
				return sleep(sctx, d)
			}}
			if retry := x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", c.run)}); retry != nil {
				t.Fatalf("retry %v", retry)
			}
			if w := c.waited(); (len(w) == 1) != tc.wait || len(w) > 1 {
				t.Fatalf("waited %v; want a wait %v", w, tc.wait)
			}
			if tc.wait {
				c.checkDelivered(t)
				return
			}
			r, _ := c.runs.Get(context.Background(), c.run.ID)
			if r.Status != runs.StatusFailed || !strings.Contains(r.Error, "in flight") {
				t.Fatalf("run %s %q; want it given up on the in-flight effect", r.Status, r.Error)
			}
			if n := len(c.rc.seen()); n != 1 {
				t.Fatalf("%d provider requests; want the crashed attempt's only", n)
			}
		})
	}
}
