package execfn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// logLine is the first JSON log line in logs whose msg is msg.
func logLine(t *testing.T, logs *bytes.Buffer, msg string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no log line %q in:\n%s", msg, logs.String())
	return nil
}

// millis is the field name of line, which must be a whole number of
// milliseconds between lo and hi, and must not also be logged under its
// name without the _ms suffix.
func millis(t *testing.T, line map[string]any, name string, lo, hi time.Duration) {
	t.Helper()
	if _, ok := line[strings.TrimSuffix(name, "_ms")]; ok {
		t.Errorf("%q is logged without its unit: %v", strings.TrimSuffix(name, "_ms"), line)
	}
	v, ok := line[name].(float64)
	if !ok || v != float64(int64(v)) || v < float64(lo.Milliseconds()) || v > float64(hi.Milliseconds()) {
		t.Errorf("%s = %v, want whole milliseconds in [%d, %d]: %v", name, line[name], lo.Milliseconds(), hi.Milliseconds(), line)
	}
}

// TestLogDurationsAreMilliseconds: the executor's log lines give a
// duration in milliseconds, under a field name ending in _ms (wait_ms,
// retry_after_ms, budget_ms, stale_after_ms), not as Go's nanosecond
// count.
func TestLogDurationsAreMilliseconds(t *testing.T) {
	t.Run("wait_ms", func(t *testing.T) {
		c := newCrashedFixture(t, -1)
		var logs bytes.Buffer
		x := c.executor(1)
		x.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", c.run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
		w := c.waited()
		if len(w) != 1 {
			t.Fatalf("waits %v", w)
		}
		millis(t, logLine(t, &logs, "executor: last try waits out an in-flight effect"), "wait_ms", w[0], w[0])
	})
	t.Run("retry_after_ms and budget_ms", func(t *testing.T) {
		c := newCrashedFixture(t, -1)
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
		defer cancel()
		var logs bytes.Buffer
		x := c.executor(1)
		x.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", c.run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
		line := logLine(t, &logs, "executor: last try cannot wait out the in-flight effect")
		millis(t, line, "retry_after_ms", 55*time.Second, time.Minute) // the claim's remaining lease
		millis(t, line, "budget_ms", 45*time.Second, 50*time.Second)   // 80 s less the 30 s margin
	})
	t.Run("stale_after_ms", func(t *testing.T) {
		f := newFixture(t)
		var logs bytes.Buffer
		f.x.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		r := f.webhookRun(t, "http://127.0.0.1:1/unused")
		later := r.CreatedAt.Add(time.Hour)
		f.x.StaleAfter = time.Minute
		f.x.Test.Clock = ledgertest.ClockFuncs{NowFunc: func() time.Time { return later }}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f.x.Runs = cancellingRuns{f.runs, cancel}
		if _, err := f.x.ResumeStale(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("stale pass: %v", err)
		}
		millis(t, logLine(t, &logs, "executor: resuming a run without progress"), "stale_after_ms", time.Minute, time.Minute)
	})
}
