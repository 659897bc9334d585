package apifn

// A retry of a failed branch fork is a branch of the same source from the
// same point (RED_TEAM 471): it re-fires what the branch re-fired, never
// the executions the branch inherited as fixed history, which the source
// performed.

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/identity"
)

// retryOfFailedBranch: the looped fixture's source completes (effect
// delivered twice); a branch from sequence 5 inherits effect's first
// execution and fails on its second (the receiver refuses it: one
// delivery); a retry of the branch, the receiver accepting again,
// completes with one delivery more (the second execution, under its own
// identity), its events starting with the source's prefix; the first
// execution is not sent again.
func retryOfFailedBranch(t *testing.T, s *replayRetryStack) {
	t.Helper()
	srcID := s.create(t, webhook.WorkflowReplayOrdinalLoop, `{"delayMs":0}`)
	if src := s.execute(t, srcID); src.Status != runs.StatusCompleted || s.sent.Load() != 2 {
		t.Fatalf("source: %s, %d deliveries", src.Status, s.sent.Load())
	}
	s.status.Store(http.StatusBadRequest)
	brID := s.fork(t, srcID, `{"mode":"branch","fromSeq":5}`)
	if br := s.execute(t, brID); br.Status != runs.StatusFailed || s.sent.Load() != 3 {
		t.Fatalf("branch: %s, %d deliveries; want failed after one", br.Status, s.sent.Load())
	}
	s.status.Store(http.StatusOK)
	retryID := s.retry(t, brID)
	retry := s.execute(t, retryID)
	if retry.Status != runs.StatusCompleted || s.sent.Load() != 4 {
		t.Fatalf("the retry of the branch: %s (%s), %d deliveries, log %v; want completed after one more (the branch's own execution), "+
			"never the execution it inherited", retry.Status, retry.Error, s.sent.Load(), typesOf(retry.Log))
	}
	if retry.IsReplay() || retry.Fork == nil || retry.Fork.Mode != runs.ForkBranch || retry.Fork.SourceRunID != srcID ||
		retry.Fork.FromSeq != 5 || retry.Fork.BranchStamps != identity.CurrentStamps() {
		t.Fatalf("the retry's fork: %+v", retry.Fork)
	}
	srcEvs, got := rawEvents(t, s.f, srcID), rawEvents(t, s.f, retryID)
	for i := range 5 {
		var a, b map[string]any
		_ = json.Unmarshal(srcEvs[i], &a)
		_ = json.Unmarshal(got[i], &b)
		if b["eventId"] != eventID(retryID, int64(i)) || a["type"] != b["type"] || b["runId"] != retryID {
			t.Fatalf("the retry's event %d: %s, the source's %s", i, got[i], srcEvs[i])
		}
	}
	// A replay fork of the retry resolves the inherited execution from
	// the source and the retry's own from the retry: nothing sent.
	repID := s.fork(t, retryID, `{"mode":"replay","fromSeq":1}`)
	if rep := s.execute(t, repID); rep.Status != runs.StatusCompleted || s.sent.Load() != 4 {
		t.Fatalf("a replay of the retry: %s (%s), %d deliveries", rep.Status, rep.Error, s.sent.Load())
	}
}

// TestRetryOfFailedBranchRefiresOnlyTheBranch: RED_TEAM 471, in memory.
func TestRetryOfFailedBranchRefiresOnlyTheBranch(t *testing.T) {
	retryOfFailedBranch(t, memReplayRetryStack(t))
}

// TestRetryOfFailedBranchDynamo: RED_TEAM 471 on the three emulators.
func TestRetryOfFailedBranchDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s, _ := dynamoReplayRetryStack(t, e, false)
		retryOfFailedBranch(t, s)
	})
}
