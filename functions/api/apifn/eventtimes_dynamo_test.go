package apifn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestEventTimesFollowSequenceDynamo: on RunsTable (both emulators) a
// run's events carry the table's millisecond precision throughout, node
// events included, so their timestamps never go back as the sequence goes
// on: a run that ends within the millisecond of its last node event (a
// completion right after node.completed, a cap breach whose cap.breached
// and run.failed are one write) has its terminal event at or after that
// event, never a fraction of a millisecond before it. A node-log append
// retried after a lost answer is still recognised as applied.
func TestEventTimesFollowSequenceDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		st := &hostruns.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")}
		created := time.Date(2026, 3, 1, 12, 0, 0, 100_000_000, time.UTC)
		at := func(ms int, ns int) time.Time {
			return created.Add(time.Duration(ms)*time.Millisecond + time.Duration(ns))
		}
		ev := func(typ string, t time.Time) hostruns.LogEvent {
			return hostruns.LogEvent{Type: typ, NodeID: "n1", At: t, Payload: json.RawMessage(`{"nodeId":"n1"}`)}
		}
		for _, end := range []string{"finish", "breach"} {
			r := hostruns.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), created)
			if err := st.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			run, err := st.Transition(ctx, r.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusRunning, "", at(1000, 0))
			if err != nil {
				t.Fatal(err)
			}
			started := []hostruns.LogEvent{ev(hostruns.EventNodeStarted, at(1500, 456_789))}
			if run, err = st.AppendLog(ctx, r.ID, run.Fence(), started, at(1500, 456_789)); err != nil {
				t.Fatal(err)
			}
			// The same append again (a retry after a lost answer) is
			// recognised as applied.
			if _, err := st.AppendLog(ctx, r.ID, hostruns.Fence{Epoch: run.Epoch, At: 0}, started, at(1500, 456_789)); err != nil {
				t.Fatalf("%s: a retried append: %v", end, err)
			}
			done := at(2000, 900_000) // node.completed at .100 + 2.0009 s
			if run, err = st.AppendLog(ctx, r.ID, run.Fence(), []hostruns.LogEvent{ev(hostruns.EventNodeCompleted, done)}, done); err != nil {
				t.Fatal(err)
			}
			last := at(2000, 950_000) // the end, within the same millisecond
			switch end {
			case "finish":
				_, err = st.Finish(ctx, r.ID, run.Epoch, hostruns.StatusCompleted, "", last)
			case "breach":
				_, err = st.Breach(ctx, r.ID, hostruns.LogEvent{Type: hostruns.EventCapBreached, At: last,
					Payload: json.RawMessage(`{"kind":"run-duration","limit":1,"observed":2}`)}, "run_timeout", "run timed out", last)
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			evs := RunEvents(got)
			var prev time.Time
			for i, e := range evs {
				ts, err := time.Parse(time.RFC3339Nano, e.Timestamp)
				if err != nil {
					t.Fatal(err)
				}
				if e.Sequence != int64(i) || !ts.Equal(ts.Truncate(time.Millisecond)) || ts.Before(prev) {
					t.Fatalf("%s: event %d %s at %s (sequence %d) after %s: the log's times must follow its sequence at the table's millisecond precision; log %+v",
						end, i, e.Type, e.Timestamp, e.Sequence, prev.Format(time.RFC3339Nano), evs)
				}
				prev = ts
			}
		}
	})
}
