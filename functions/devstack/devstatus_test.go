package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestDevStatusShowsExecutorLag: a run started 90 s after its creation is
// recorded as the executor's start lag, emitted as the EMF metric
// idemkit.executor.start_lag (Milliseconds) and shown in `idemkit dev`'s
// status line; an interval without starts prints no line.
func TestDevStatusShowsExecutorLag(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mem := runs.NewMemRuns()
	r := runs.NewRun("acme", "conformance-noop", nil, created)
	if err := mem.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	lag := &lagStatus{next: emf.New(&metrics, "idemkit")}
	x := &execfn.Executor{Runs: mem, Metrics: lag, Test: execfn.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return created.Add(90 * time.Second) }}}}
	if err := x.Execute(ctx, r.ID); err != nil {
		t.Fatal(err)
	}

	var rec map[string]any
	if err := json.Unmarshal(metrics.Bytes(), &rec); err != nil {
		t.Fatalf("metric line %q: %v", metrics.String(), err)
	}
	if rec[execfn.MetricStartLag] != float64(90000) || rec["trigger"] != "stream" ||
		!strings.Contains(metrics.String(), `"Unit":"Milliseconds"`) {
		t.Errorf("metric %s, want %s = 90000 Milliseconds, trigger stream", metrics.String(), execfn.MetricStartLag)
	}

	var out bytes.Buffer
	sw := &syncWriter{w: &out}
	printed := func() string { sw.mu.Lock(); defer sw.mu.Unlock(); return out.String() }
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); lag.run(sctx, sw, time.Millisecond) }()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(printed(), "executor lag") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	want := "idemkit dev: status: executor lag (created -> started) last 1m30s, max 1m30s over 1 runs in 1ms\n"
	if got := out.String(); got != want {
		t.Errorf("status output %q, want exactly one line %q", got, want)
	}
}
