package execfn

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
)

// hangingFailureRuns refuses every run's start (a transient store error)
// and never answers the count of its failure (a connection that hangs: the
// SDK's client bounds no call by a time of its own) until the call's
// context ends; it records the deadline that call was given.
type hangingFailureRuns struct {
	*hostruns.MemRuns
	mu       sync.Mutex
	hung     string // the run whose start is refused
	deadline time.Time
	bounded  bool
}

var errRefusedStart = errors.New("runs table: service unavailable")

func (h *hangingFailureRuns) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if id != h.hung {
		return h.MemRuns.Transition(ctx, id, from, to, msg, now)
	}
	return hostruns.Run{}, errRefusedStart
}

func (h *hangingFailureRuns) NoteFailure(ctx context.Context, id, msg string, now time.Time) (int, error) {
	h.mu.Lock()
	h.deadline, h.bounded = ctx.Deadline()
	h.mu.Unlock()
	<-ctx.Done()
	return 0, ctx.Err()
}

// A store call of the stream handler's give-up (the count of a failed
// try) that never answers is cut before the invocation's deadline, and
// the record is reported by its sequence number, the records before it
// done: the handler answers. Before, the call kept the invocation's own
// context and ran to its deadline, where Lambda ends the invocation as
// timed out and the stream delivers the whole batch again (bisected), the
// records before it handled again (RED_TEAM 452).
func TestHungFailureCountIsCutBeforeTheDeadlineAndItsRecordReported(t *testing.T) {
	f := newFixture(t)
	done := f.webhookRun(t, "http://127.0.0.1:1/unused")
	if _, err := f.runs.Transition(context.Background(), done.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusCompleted, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	hung := f.webhookRun(t, "http://127.0.0.1:1/unused")
	h := &hangingFailureRuns{MemRuns: f.runs, hung: hung.ID}
	f.x.Runs = h
	// The invocation's deadline leaves endMargin and one second: the
	// hung call, cut or not, ends within it.
	ctx, cancel := context.WithTimeout(context.Background(), endMargin+time.Second)
	defer cancel()
	invocation, _ := ctx.Deadline()
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamInsert("e1", "100", done), streamInsert("e2", "200", hung),
	}}
	resp, err := f.x.HandleLambda(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	dl, bounded := h.deadline, h.bounded
	h.mu.Unlock()
	if !bounded || !dl.Before(invocation) {
		t.Fatalf("the failure's count was given deadline %v (bounded %v), %v before the invocation's; want it cut before the deadline", dl, bounded, invocation.Sub(dl))
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "200" {
		t.Fatalf("batch item failures %+v; want the hung record's sequence number alone", resp.BatchItemFailures)
	}
}

func streamInsert(id, seq string, r hostruns.Run) events.DynamoDBEventRecord {
	img := map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute(r.ID), "tenant": events.NewStringAttribute(r.Tenant),
		"workflowId": events.NewStringAttribute(r.WorkflowID), "status": events.NewStringAttribute(string(hostruns.StatusPending)),
	}
	return events.DynamoDBEventRecord{EventID: id, EventName: "INSERT", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{SequenceNumber: seq, StreamViewType: "NEW_AND_OLD_IMAGES",
			Keys: map[string]events.DynamoDBAttributeValue{"pk": img["pk"]}, NewImage: img}}
}

// hangingDueRuns never answers the scheduled pass's query of the due runs
// until the call's context ends; it records the deadline it was given.
type hangingDueRuns struct {
	*hostruns.MemRuns
	mu       sync.Mutex
	deadline time.Time
	bounded  bool
}

func (h *hangingDueRuns) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	h.mu.Lock()
	h.deadline, h.bounded = ctx.Deadline()
	h.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// The scheduled pass's store calls are cut before the invocation's
// deadline too: a query of the due runs that never answers fails the pass
// (logged, the invocation's error) before the deadline. Before, it ran to
// the deadline itself, where Lambda ends the invocation as timed out: the
// pass logged nothing (RED_TEAM 452).
func TestHungCallOfTheScheduledPassIsCutBeforeTheDeadline(t *testing.T) {
	f := newFixture(t)
	h := &hangingDueRuns{MemRuns: f.runs}
	f.x.Runs = h
	ctx, cancel := context.WithTimeout(context.Background(), endMargin+time.Second)
	defer cancel()
	invocation, _ := ctx.Deadline()
	_, err := f.x.HandleInvoke(ctx, []byte(`{"resumeDue":true}`))
	if !errors.Is(err, ErrRunsQuery) {
		t.Fatalf("pass error %v; want the failed query", err)
	}
	h.mu.Lock()
	dl, bounded := h.deadline, h.bounded
	h.mu.Unlock()
	if !bounded || !dl.Before(invocation) {
		t.Fatalf("the due runs' query was given deadline %v (bounded %v), %v before the invocation's; want it cut before the deadline", dl, bounded, invocation.Sub(dl))
	}
}
