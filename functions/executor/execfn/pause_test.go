package execfn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
)

// image is the stream image of a run at status s.
func image(r hostruns.Run, s hostruns.Status) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: r.ID}, "tenant": &types.AttributeValueMemberS{Value: r.Tenant},
		"workflowId": &types.AttributeValueMemberS{Value: r.WorkflowID}, "status": &types.AttributeValueMemberS{Value: string(s)},
	}
}

// modify is the stream record of a run's change from status was to is.
func modify(id string, r hostruns.Run, was, is hostruns.Status) stream.StreamRecord {
	return stream.StreamRecord{EventID: id, EventName: "MODIFY", OldImage: image(r, was), NewImage: image(r, is)}
}

// loopRun creates a run of the replay-ordinal loop (start, effect, wait,
// effect) delivering to url without waiting.
func (f *fixture) loopRun(t *testing.T, url string) hostruns.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"url": url, "delayMs": 0})
	r := hostruns.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, in, time.Now())
	if err := f.runs.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// logOf is a run's log as type@node.
func logOf(t *testing.T, f *fixture, id string) ([]string, hostruns.Run) {
	t.Helper()
	r, err := f.runs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(r.Log))
	for _, ev := range r.Log {
		out = append(out, ev.Type+"@"+ev.NodeID)
	}
	return out, r
}

func equalLog(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestPausedRunDrainsItsNodeAndResumes: a run paused (drain-current-node)
// while a node executes lets that node end (node.completed, then
// run.paused) and starts no other; the stream's record of its resume
// makes the executor continue it to its end, each effect delivered once.
func TestPausedRunDrainsItsNodeAndResumes(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t)
	run := f.loopRun(t, rc.srv.URL)
	ctx := context.Background()
	paused := false
	f.x.Test.NodeStarted = func(id, node string) {
		if node == "effect" && !paused {
			paused = true
			if _, err := f.runs.Pause(ctx, id, hostruns.Pause{By: "p1"}, time.Now()); err != nil {
				t.Errorf("pause: %v", err)
			}
		}
	}
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	got, r := logOf(t, f, run.ID)
	if r.Status != hostruns.StatusPaused || !equalLog(got, "node.started@start", "node.completed@start", "node.started@effect", "node.completed@effect", "run.paused@") {
		t.Fatalf("after the pause: %s, log %v, want paused after the drained node's end", r.Status, got)
	}
	if n := len(rc.seen()); n != 1 {
		t.Fatalf("%d deliveries while paused, want 1", n)
	}
	// A duplicate of the run's record while paused drives nothing.
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	if got2, _ := logOf(t, f, run.ID); len(got2) != len(got) {
		t.Fatalf("a paused run advanced: %v", got2)
	}
	if _, err := f.runs.Unpause(ctx, run.ID, "r1", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{modify("e2", run, hostruns.StatusPaused, hostruns.StatusRunning)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	got, r = logOf(t, f, run.ID)
	if r.Status != hostruns.StatusCompleted || !equalLog(got[5:], "run.resumed@", "node.started@wait", "node.completed@wait", "node.started@effect", "node.completed@effect",
		"node.started@wait", "node.completed@wait") {
		t.Fatalf("after the resume: %s, log %v, want completed from where it paused", r.Status, got)
	}
	if n := len(rc.seen()); n != 2 {
		t.Fatalf("%d deliveries, want 2 (each execution of effect once)", n)
	}
}

// TestImmediatePauseCutsTheAttempt: an immediate pause while a node
// executes cuts its attempt: no terminal event is recorded for it (the
// execution is fenced), run.paused names it, and the resumed run starts
// it afresh (a node.started of its own) whose effect the ledger answers
// from its record, never delivered twice.
func TestImmediatePauseCutsTheAttempt(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t)
	run := f.loopRun(t, rc.srv.URL)
	ctx := context.Background()
	paused := false
	f.x.Test.NodeStarted = func(id, node string) {
		if node == "effect" && !paused {
			paused = true
			if _, err := f.runs.Pause(ctx, id, hostruns.Pause{Drain: hostruns.DrainImmediate, By: "p1"}, time.Now()); err != nil {
				t.Errorf("pause: %v", err)
			}
		}
	}
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	got, r := logOf(t, f, run.ID)
	if r.Status != hostruns.StatusPaused || !equalLog(got, "node.started@start", "node.completed@start", "node.started@effect", "run.paused@") {
		t.Fatalf("after the cut: %s, log %v, want no terminal event for the cut attempt", r.Status, got)
	}
	var p struct {
		Node    string `json:"interruptedNodeId"`
		Attempt int    `json:"interruptedAttempt"`
		Drain   string `json:"drainPolicy"`
	}
	if err := json.Unmarshal(r.Log[3].Payload, &p); err != nil || p.Node != "effect" || p.Attempt != 1 || p.Drain != hostruns.DrainImmediate {
		t.Fatalf("run.paused %s, want immediate, effect attempt 1 cut", r.Log[3].Payload)
	}
	if _, err := f.runs.Unpause(ctx, run.ID, "r1", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{modify("e2", run, hostruns.StatusPaused, hostruns.StatusRunning)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	got, r = logOf(t, f, run.ID)
	if r.Status != hostruns.StatusCompleted || !equalLog(got[4:], "run.resumed@", "node.started@effect", "node.completed@effect",
		"node.started@wait", "node.completed@wait", "node.started@effect", "node.completed@effect", "node.started@wait", "node.completed@wait") {
		t.Fatalf("after the resume: %s, log %v, want the cut node started afresh", r.Status, got)
	}
	for _, typ := range got {
		if typ == "node.failed@effect" {
			t.Fatalf("a node.failed was recorded for the cut attempt: %v", got)
		}
	}
	if n := len(rc.seen()); n != 2 {
		t.Fatalf("%d deliveries, want 2 (the cut attempt's effect answered from its record)", n)
	}
}

// TestOnlyAResumeOfTheRunsOtherWritesDrivesIt: of a run's MODIFY records
// only its change from paused to running is executed; any other (a
// heartbeat, a node event, a pause) is skipped.
func TestOnlyAResumeOfTheRunsOtherWritesDrivesIt(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t)
	run := f.webhookRun(t, rc.srv.URL)
	ctx := context.Background()
	for _, rec := range []stream.StreamRecord{
		modify("m1", run, hostruns.StatusPending, hostruns.StatusPending),
		modify("m2", run, hostruns.StatusPending, hostruns.StatusRunning),
		modify("m3", run, hostruns.StatusRunning, hostruns.StatusPaused),
	} {
		if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{rec}); retry != nil {
			t.Fatalf("%s: retry %v", rec.EventID, retry)
		}
	}
	if s := f.status(t, run.ID); s != hostruns.StatusPending || len(rc.seen()) != 0 {
		t.Fatalf("run %s after MODIFY records that are no resume, %d deliveries; want pending, none", s, len(rc.seen()))
	}
}

// TestPausedPendingRunStartsOnResume: a run paused before the executor
// took it (pending) is not started by its INSERT's delivery, nor by that
// delivery retried; the record of its resume starts it, and the INSERT
// retried again after the resume (a failed batch) delivers no effect
// twice.
func TestPausedPendingRunStartsOnResume(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t)
	run := f.loopRun(t, rc.srv.URL)
	ctx := context.Background()
	if _, err := f.runs.Pause(ctx, run.ID, hostruns.Pause{By: "p1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
	}
	if got, r := logOf(t, f, run.ID); r.Status != hostruns.StatusPaused || !equalLog(got, "run.paused@") || len(rc.seen()) != 0 {
		t.Fatalf("a paused pending run: %s, log %v, %d deliveries; want paused, untouched", r.Status, got, len(rc.seen()))
	}
	if _, err := f.runs.Unpause(ctx, run.ID, "r1", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{modify("e2", run, hostruns.StatusPaused, hostruns.StatusRunning), insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	got, r := logOf(t, f, run.ID)
	if r.Status != hostruns.StatusCompleted || len(got) < 3 || got[0] != "run.paused@" || got[1] != "run.resumed@" || got[2] != "node.started@start" {
		t.Fatalf("after the resume: %s, log %v; want completed, run.paused and run.resumed before the first node", r.Status, got)
	}
	if n := len(rc.seen()); n != 2 {
		t.Fatalf("%d deliveries, want 2 (each execution of effect once)", n)
	}
}
