package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// passCounter records the counts an Executor writes.
type passCounter struct {
	mu     sync.Mutex
	counts map[string]float64
}

func (c *passCounter) Count(name string, n float64, _ map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[name] += n
}

func (c *passCounter) Milliseconds(string, float64, map[string]string) {}

func (c *passCounter) get(name string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[name]
}

// TestSchedulePassesAreCounted (RED_TEAM 423): each invocation of the
// minute schedule counts one MetricResumePasses as its pass begins; a
// runs-stream invocation counts none. The count is what the
// executor-not-invoked alarm reads: a schedule that stops invoking the
// function (its rule disabled, its invoke permission removed, its
// invocations throttled until dropped) writes nothing else, and parked
// and stale runs then never resume. Before, nothing was written per pass.
func TestSchedulePassesAreCounted(t *testing.T) {
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	rec := &passCounter{counts: map[string]float64{}}
	x := &Executor{Runs: hostruns.NewMemRuns(), Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: rec}
	for i := 1; i <= 3; i++ {
		if _, err := x.HandleInvoke(context.Background(), json.RawMessage(`{"resumeDue": true}`)); err != nil {
			t.Fatal(err)
		}
		if got := rec.get(MetricResumePasses); got != float64(i) {
			t.Fatalf("after %d schedule invocations %s is %v", i, MetricResumePasses, got)
		}
	}
	if _, err := x.HandleInvoke(context.Background(), json.RawMessage(`{"Records":[]}`)); err != nil {
		t.Fatal(err)
	}
	if got := rec.get(MetricResumePasses); got != 3 {
		t.Fatalf("a stream invocation counted a pass: %v", got)
	}
}
