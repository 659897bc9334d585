package apifn

// A replay fork of a source whose node attempt an immediate pause cut
// (node.started, then run.paused naming the node, then a fresh
// node.started after the resume) agrees with that source event for event:
// no replay.diverged, from every fork point (RED_TEAM 469). Driven end to
// end: the api handler creates, pauses, resumes and forks; the executor
// executes each run over one run store and ledger.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/divergence"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// replayOfCutSource: the looped fixture's source is paused immediately
// while its first effect executes, resumed, and completes (one delivery
// per execution of effect: two). Its events:
//
//	0 run.started, 1-2 start, 3 node.started effect, 4 run.paused (effect
//	cut), 5 run.resumed, 6-7 effect, 8-9 wait, 10-11 effect, 12-13 wait,
//	14 run.completed.
//
// A replay fork from each fork point 0..14 completes, sends nothing and
// records no replay.diverged: nothing differs.
func replayOfCutSource(t *testing.T, s *replayRetryStack) {
	t.Helper()
	srcID := s.create(t, webhook.WorkflowReplayOrdinalLoop, `{"delayMs":0}`)
	paused := false
	s.x.Test.NodeStarted = func(id, node string) {
		if id == srcID && node == "effect" && !paused {
			paused = true
			s.post(t, "/runs/"+runs.ProjectID(srcID)+":pause", `{"drainPolicy":"immediate"}`, 202)
		}
	}
	if src := s.execute(t, srcID); src.Status != runs.StatusPaused {
		t.Fatalf("source after the pause: %s", src.Status)
	}
	s.post(t, "/runs/"+runs.ProjectID(srcID)+":resume", `{}`, 202)
	src := s.execute(t, srcID)
	s.x.Test.NodeStarted = nil
	var got []string
	for _, e := range RunEvents(src) {
		got = append(got, e.Type+"@"+e.NodeID)
	}
	want := "run.started@ node.started@start node.completed@start node.started@effect run.paused@ run.resumed@ " +
		"node.started@effect node.completed@effect node.started@wait node.completed@wait " +
		"node.started@effect node.completed@effect node.started@wait node.completed@wait run.completed@"
	if src.Status != runs.StatusCompleted || strings.Join(got, " ") != want {
		t.Fatalf("source: %s, events %v", src.Status, got)
	}
	sent := s.sent.Load()
	for from := 0; from <= 14; from++ {
		id := s.fork(t, srcID, fmt.Sprintf(`{"mode":"replay","fromSeq":%d}`, from))
		rep := s.execute(t, id)
		if rep.Status != runs.StatusCompleted || s.sent.Load() != sent {
			t.Fatalf("replay from %d: %s (%s), %d deliveries; want completed, nothing sent", from, rep.Status, rep.Error, s.sent.Load()-sent)
		}
		for _, e := range rep.Log {
			if e.Type == divergence.Event {
				t.Fatalf("replay from %d reports a divergence from a source it reproduces: %s\nfork log %v", from, e.Payload, typesOf(rep.Log))
			}
		}
	}
}

func typesOf(log []runs.LogEvent) []string {
	out := make([]string, len(log))
	for i, e := range log {
		out[i] = e.Type + "@" + e.NodeID
	}
	return out
}

// TestReplayOfCutSourceDoesNotDiverge: RED_TEAM 469, in memory.
func TestReplayOfCutSourceDoesNotDiverge(t *testing.T) {
	replayOfCutSource(t, memReplayRetryStack(t))
}

// TestReplayOfCutSourceDoesNotDivergeDynamo: RED_TEAM 469 on the three
// emulators (the fork's recorded events written to and read from
// RunsTable).
func TestReplayOfCutSourceDoesNotDivergeDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s, _ := dynamoReplayRetryStack(t, e, false)
		replayOfCutSource(t, s)
	})
}
