package execfn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/faultrx"
)

// A stream record whose execution runs as long as the invocation lets it
// (here a receiver that never answers) ends endMargin before the
// invocation's deadline, so its failure is counted on the run and the
// handler answers before the deadline: the retry of a try that has one
// left, and on the last try (MaxAttempts 1) the run dealt with (parked
// for its effect's next attempt, or ended), the record done. Before, the
// execution ran to the deadline itself, the failure's write was refused
// for its expired context ("could not count the failure"), and the
// handler answered after the deadline, which Lambda discards: a run
// whose every try so ended was never counted, never given up by its
// last try, and reached the failure queue "running". On the emulators, at
// once: each one's time is the executions run out to their deadlines.
func TestExecutionCutByTheDeadlineIsCounted(t *testing.T) {
	dynamotest.ForEachConcurrently(t, func(t *testing.T, e *dynamotest.Emulator) {
		runsTbl, effTbl := e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable")
		for _, maxAttempts := range []int{3, 1} {
			t.Run(fmt.Sprint("max attempts ", maxAttempts), func(t *testing.T) {
				clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
				s := newFaultStack(t, e, clk, runsTbl, effTbl)
				s.x.MaxAttempts = maxAttempts
				rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Always(faultrx.Hang)})
				defer rx.Close()
				run := s.newRun(t, rx.URL())
				ctx, cancel := context.WithTimeout(context.Background(), endMargin+2*time.Second)
				defer cancel()
				deadline, _ := ctx.Deadline()
				retry := s.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)})
				if left := time.Until(deadline); left <= 0 {
					t.Fatalf("the handler answered %v after the invocation's deadline: Lambda would discard it", -left)
				}
				r := s.run(t, run.ID)
				if r.Failures != 1 {
					t.Fatalf("run %s counts %d failures (error %q); want the cut execution counted", r.Status, r.Failures, r.Error)
				}
				if maxAttempts > 1 {
					if fmt.Sprint(retry) != "[e1]" {
						t.Fatalf("retry %v; want the record retried", retry)
					}
					return
				}
				if retry != nil || !r.Status.Terminal() && r.Wake.At.IsZero() {
					t.Fatalf("last try: retry %v, run %s wake %v; want the record done and the run parked or ended", retry, r.Status, r.Wake.At)
				}
			})
		}
	})
}

// The stale-run pass, which counts its failures like stream tries: a
// stale run whose execution runs to the invocation's deadline is counted
// too, and the pass answers before the deadline. Before, as for a stream
// try (above), its failure was never counted, so a run whose every
// execution ran out of time was resumed by every pass and never given up.
// A record, or a stale run, reached with no time left to execute it is
// not started and no failure is counted: it is retried (a later pass
// claims it), as a try never made. On the emulators, at once (as above).
func TestStaleRunCutByTheDeadlineIsCounted(t *testing.T) {
	dynamotest.ForEachConcurrently(t, func(t *testing.T, e *dynamotest.Emulator) {
		runsTbl, effTbl := e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable")
		clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
		s := newFaultStack(t, e, clk, runsTbl, effTbl)
		s.x.MaxAttempts, s.x.StaleAfter = 3, 10*time.Minute
		rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Always(faultrx.Hang)})
		defer rx.Close()
		t0 := clk.Now()
		stale := s.newRun(t, rx.URL())
		if _, err := s.runs.Transition(context.Background(), stale.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", t0); err != nil {
			t.Fatal(err)
		}
		clk.Set(t0.Add(10*time.Minute + time.Second))

		// No time left: neither the stale run nor a stream record is
		// started, nothing is counted.
		short, cancelShort := context.WithTimeout(context.Background(), endMargin-500*time.Millisecond)
		defer cancelShort()
		if n, err := s.x.ResumeStale(short); n != 0 || err != nil {
			t.Fatalf("pass with no time left: resumed %d (%v); want none", n, err)
		}
		fresh := s.newRun(t, rx.URL())
		if retry := s.x.HandleRecords(short, []stream.StreamRecord{insert("e2", fresh)}); fmt.Sprint(retry) != "[e2]" {
			t.Fatalf("record with no time left: retry %v; want it retried", retry)
		}
		if r, f := s.run(t, stale.ID), s.run(t, fresh.ID); r.Failures != 0 || f.Failures != 0 || f.Status != runs.StatusPending || rx.Count() != 0 {
			t.Fatalf("with no time left: failures %d and %d, fresh run %s, %d deliveries; want nothing started or counted", r.Failures, f.Failures, f.Status, rx.Count())
		}

		ctx, cancel := context.WithTimeout(context.Background(), endMargin+2*time.Second)
		defer cancel()
		deadline, _ := ctx.Deadline()
		if n, _ := s.x.ResumeStale(ctx); n != 1 {
			t.Fatalf("resumed %d stale runs; want 1", n)
		}
		if left := time.Until(deadline); left <= 0 {
			t.Fatalf("the pass answered %v after the invocation's deadline", -left)
		}
		if r := s.run(t, stale.ID); r.Failures != 1 {
			t.Fatalf("stale run %s counts %d failures (error %q); want the cut execution counted", r.Status, r.Failures, r.Error)
		}
	})
}
