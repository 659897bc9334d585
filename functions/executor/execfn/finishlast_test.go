package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
)

// refusedFinish is a run store whose Finish to a status is refused, before
// anything is written, the first refusals times (a throttled or failed
// UpdateItem): every other call is the memory store's.
type refusedFinish struct {
	*hostruns.MemRuns
	to       hostruns.Status
	refusals atomic.Int32
}

func (s *refusedFinish) Finish(ctx context.Context, id string, epoch int64, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if to == s.to && s.refusals.Add(-1) >= 0 {
		return hostruns.Run{}, errors.New("host: update run: ThrottlingException: rate exceeded")
	}
	return s.MemRuns.Finish(ctx, id, epoch, to, msg, now)
}

// TestLastTryEndsACompletionAsCompleted: the stream's last try delivers the
// webhook (the ledger records its success) and its completion, the run's
// Finish, is refused by the runs table. The run ends as its execution
// ended, completed, by the completion tried again, never "failed: gave up"
// over an effect that was delivered (whose retry, under the run-keyed
// provider key of a new run, would deliver it a second time). Refused once
// more, the run still ends: failed, under the host's own give-up.
func TestLastTryEndsACompletionAsCompleted(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	for _, refusals := range []int32{1, 2} {
		f := newFixture(t)
		rs := &refusedFinish{MemRuns: f.runs, to: hostruns.StatusCompleted}
		rs.refusals.Store(refusals)
		f.x.Runs, f.x.MaxAttempts = rs, 1
		n.Store(0)
		run := f.webhookRun(t, srv.URL)
		if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("refused %d: retry %v, want the last try's record done", refusals, retry)
		}
		r, _ := f.runs.Get(context.Background(), run.ID)
		switch refusals {
		case 1:
			if r.Status != hostruns.StatusCompleted || r.Error != "" {
				t.Fatalf("completion refused once on the last try: run %s (%q), want completed: its webhook was delivered", r.Status, r.Error)
			}
		case 2:
			if r.Status != hostruns.StatusFailed || !strings.Contains(r.Error, "gave up after 1 attempts") {
				t.Fatalf("completion refused twice on the last try: run %s (%q), want failed by the give-up", r.Status, r.Error)
			}
		}
		if n.Load() != 1 {
			t.Fatalf("refused %d: %d deliveries, want 1", refusals, n.Load())
		}
	}
}

// refusedAppend is a run store whose node-log append of a node.completed
// is refused, before anything is written, the first refusals times.
type refusedAppend struct {
	*hostruns.MemRuns
	refusals atomic.Int32
}

func (s *refusedAppend) AppendLog(ctx context.Context, id string, f hostruns.Fence, evs []hostruns.LogEvent, now time.Time) (hostruns.Run, error) {
	if len(evs) > 0 && evs[0].Type == hostruns.EventNodeCompleted && evs[0].NodeID == "effect" && s.refusals.Add(-1) >= 0 {
		return hostruns.Run{}, errors.New("host: append run log: ThrottlingException: rate exceeded")
	}
	return s.MemRuns.AppendLog(ctx, id, f, evs, now)
}

// TestLastTryRecordsADeliveredNodeAsCompleted: on the stream's last try a
// graph workflow's side-effecting node delivers (the ledger records its
// success) and the append of its node.completed is refused. The last try
// executes the run once more, as the next try would: the ledger answers
// the node from its record (nothing is sent again), its node.completed is
// appended and the run completes, never "failed: gave up" over a
// delivered effect. Refused on that execution as well, the run still
// ends, failed by the give-up.
func TestLastTryRecordsADeliveredNodeAsCompleted(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	for _, refusals := range []int32{1, 2} {
		f := newFixture(t)
		rs := &refusedAppend{MemRuns: f.runs}
		rs.refusals.Store(refusals)
		f.x.Runs, f.x.MaxAttempts, f.x.FixtureURL = rs, 1, srv.URL+"/fixture"
		n.Store(0)
		run := hostruns.NewRun("acme", webhook.WorkflowReplaySideEffect, json.RawMessage(`{"delayMs":1}`), time.Now())
		if err := f.runs.Create(context.Background(), run); err != nil {
			t.Fatal(err)
		}
		if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("refused %d: retry %v, want the last try's record done", refusals, retry)
		}
		r, _ := f.runs.Get(context.Background(), run.ID)
		var types []string
		for _, e := range r.Log {
			types = append(types, e.Type+":"+e.NodeID)
		}
		switch refusals {
		case 1:
			if r.Status != hostruns.StatusCompleted || r.Log[len(r.Log)-1].Type != hostruns.EventNodeCompleted {
				t.Fatalf("node.completed refused once on the last try: run %s (%q), log %v; want completed: its effect was delivered", r.Status, r.Error, types)
			}
		case 2:
			if r.Status != hostruns.StatusFailed || !strings.Contains(r.Error, "gave up after 1 attempts") {
				t.Fatalf("node.completed refused twice on the last try: run %s (%q), want failed by the give-up", r.Status, r.Error)
			}
		}
		if n.Load() != 1 {
			t.Fatalf("refused %d: %d deliveries, want 1", refusals, n.Load())
		}
	}
}

// TestRecordedNodeFailureEndsTheRunWithItsError: a graph run whose node
// failed (node.failed recorded) and whose end was not written (the runs
// table refused it; the executor could as well have crashed) is ended by
// its next execution with the node's recorded error, as the first would
// have ended it: its run.failed does not depend on whether an executor
// stopped in between.
func TestRecordedNodeFailureEndsTheRunWithItsError(t *testing.T) {
	want := "node fail failed: idemkit.node_failed: the node fails on every execution (conformance-failure)"
	f := newFixture(t)
	rs := &refusedFinish{MemRuns: f.runs, to: hostruns.StatusFailed}
	rs.refusals.Store(1)
	f.x.Runs = rs // MaxAttempts 0: the record is retried
	run := hostruns.NewRun("acme", webhook.WorkflowFailure, json.RawMessage(`{}`), time.Now())
	if err := f.runs.Create(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); len(retry) != 1 {
		t.Fatalf("retry %v, want the record retried after its end was refused", retry)
	}
	if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v, want the record done", retry)
	}
	r, _ := f.runs.Get(context.Background(), run.ID)
	if r.Status != hostruns.StatusFailed || r.Error != want {
		t.Fatalf("run %s (%q), want failed (%q)", r.Status, r.Error, want)
	}
}

// refusedAppendAndFinish refuses a node.completed append of node "effect"
// (refusedAppend) and a Finish to a status (refusedFinish), each its own
// number of times, over one memory store.
type refusedAppendAndFinish struct {
	*refusedAppend
	fin *refusedFinish
}

func (s *refusedAppendAndFinish) Finish(ctx context.Context, id string, epoch int64, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	return s.fin.Finish(ctx, id, epoch, to, msg, now)
}

// TestLastTryReexecutionEndsACompletionAsCompleted: on the stream's last
// try a graph run's side-effecting node delivers, the append of its
// node.completed is refused, and the last try's execution once more
// (replaying the node from the ledger, appending node.completed) has its
// completion refused once. The run ends completed, by the completion
// tried again, as when the first execution's completion is refused: never
// "failed: gave up" over a delivered effect whose completion was refused
// once.
func TestLastTryReexecutionEndsACompletionAsCompleted(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	f := newFixture(t)
	ra := &refusedAppend{MemRuns: f.runs}
	ra.refusals.Store(1)
	rf := &refusedFinish{MemRuns: f.runs, to: hostruns.StatusCompleted}
	rf.refusals.Store(1)
	f.x.Runs, f.x.MaxAttempts, f.x.FixtureURL = &refusedAppendAndFinish{refusedAppend: ra, fin: rf}, 1, srv.URL+"/fixture"
	run := hostruns.NewRun("acme", webhook.WorkflowReplaySideEffect, json.RawMessage(`{"delayMs":1}`), time.Now())
	if err := f.runs.Create(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v, want the last try's record done", retry)
	}
	r, _ := f.runs.Get(context.Background(), run.ID)
	if r.Status != hostruns.StatusCompleted || r.Error != "" {
		t.Fatalf("node.completed and then the completion refused once each on the last try: run %s (%q), want completed: its effect was delivered", r.Status, r.Error)
	}
	if n.Load() != 1 {
		t.Fatalf("%d deliveries, want 1", n.Load())
	}
}
