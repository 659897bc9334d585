package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// BenchmarkExecuteCappedLargeConfigurable: one execution (memory store)
// of the three-node workflow for a run with runTimeoutMs and a
// configurable near the largest a create body admits (about 250 KB under
// extensions): what reading the run's caps costs an execution.
func BenchmarkExecuteCappedLargeConfigurable(b *testing.B) {
	conf := `{"version":1,"run":{"runTimeoutMs":3600000},"extensions":{"acme":{"blob":"` + strings.Repeat("x", 250_000) + `"}}}`
	benchExecuteConfigurable(b, conf)
}

// BenchmarkExecuteCappedSmallConfigurable: as above with a configurable
// of only the run section.
func BenchmarkExecuteCappedSmallConfigurable(b *testing.B) {
	benchExecuteConfigurable(b, `{"version":1,"run":{"runTimeoutMs":3600000,"maxLoopIterations":5}}`)
}

func benchExecuteConfigurable(b *testing.B, conf string) {
	store := runs.NewMemRuns()
	now := time.Now().UTC()
	x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return now }}}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r := runs.NewRun("acme", webhook.WorkflowMultiNode, json.RawMessage(`{}`), now)
		r.Options.Configurable = json.RawMessage(conf)
		if err := store.Create(ctx, r); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := x.Execute(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
	}
}
