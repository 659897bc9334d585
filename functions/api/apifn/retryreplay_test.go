package apifn

// A retry (POST /runs/{runId}/retry) of a failed replay fork is itself a
// replay fork of the same source, from the same point, in the same mode
// (RED_TEAM 442): its side-effecting nodes are resolved from the source's
// record and never performed, and fail closed (replay_source_missing)
// where the source has none. Driven end to end: the api handler creates,
// forks, pauses, resumes and retries; the executor executes each run over
// the same run store and ledger; a local receiver counts what is sent.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// replayRetryStack is the api handler and the executor over one run store
// and one ledger, the executor's fixture destination a receiver that
// counts the requests it gets (sent) and answers status.
type replayRetryStack struct {
	f      *fixture
	rs     runs.RunStore
	l      *ledger.Ledger
	x      *execfn.Executor
	sent   atomic.Int64
	status atomic.Int64
	keys   int
}

func newReplayRetryStack(t *testing.T, rs runs.RunStore, st idem.Store, l *ledger.Ledger) *replayRetryStack {
	t.Helper()
	s := &replayRetryStack{rs: rs, l: l}
	s.status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.sent.Add(1)
		w.WriteHeader(int(s.status.Load()))
	}))
	t.Cleanup(srv.Close)
	s.f = hostOf(t, rs, idem.Config{Store: st}, func(f *fixture, c *Config) {
		f.ledger, c.Ledger = l, l
	})
	s.x = &execfn.Executor{Runs: rs, Logger: discard(), FixtureURL: srv.URL + "/fixture",
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true},
			Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxTries: 3},
		Test: execfn.TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}}}
	return s
}

// memReplayRetryStack is the stack over runs and a ledger in memory.
func memReplayRetryStack(t *testing.T) *replayRetryStack {
	t.Helper()
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	return newReplayRetryStack(t, runs.NewMemRuns(), nil, l)
}

// dynamoReplayRetryStack is the stack over the emulator's RunsTable,
// IdempotencyTable and EffectsTable (the runs written in the completion
// transaction when transactional); cnt counts its calls.
func dynamoReplayRetryStack(t *testing.T, e *dynamotest.Emulator, transactional bool) (*replayRetryStack, *dynamotest.Counter) {
	t.Helper()
	cnt := dynamotest.NewCounter()
	c := e.Client(dynamotest.FastRetries, cnt.Middleware())
	rs, st := dynamoStores(t, e, c, transactional)
	return newReplayRetryStack(t, rs, st, dynamoLedger(t, e, c)), cnt
}

func dynamoLedger(t *testing.T, e *dynamotest.Emulator, c *dynamodb.Client) *ledger.Ledger {
	t.Helper()
	es, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: e.CreateTable(t, "EffectsTable")})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: es, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// key is a new Idempotency-Key.
func (s *replayRetryStack) key() string {
	s.keys++
	return fmt.Sprintf("k-replay-retry-%016d", s.keys)
}

// post sends a keyed POST as tenant acme and wants status.
func (s *replayRetryStack) post(t *testing.T, path, body string, status int) map[string]any {
	t.Helper()
	r, m := s.f.do(t, ev("POST", path, "acme", s.key(), body))
	if r.StatusCode != status {
		t.Fatalf("POST %s: %d %s, want %d", path, r.StatusCode, r.Body, status)
	}
	return m
}

func (s *replayRetryStack) create(t *testing.T, workflowID, inputs string) string {
	t.Helper()
	return s.post(t, "/runs", `{"workflowId":"`+workflowID+`","inputs":`+inputs+`}`, 201)["runId"].(string)
}

func (s *replayRetryStack) fork(t *testing.T, id, body string) string {
	t.Helper()
	return s.post(t, forkPath(id), body, 201)["runId"].(string)
}

// retry retries the failed run id: the 201's runId, checked linked to id.
func (s *replayRetryStack) retry(t *testing.T, id string) string {
	t.Helper()
	m := s.post(t, "/runs/"+runs.ProjectID(id)+"/retry", "", 201)
	if m["on"] != id || m["retryOf"] != id || m["status"] != "pending" {
		t.Fatalf("retry of %s: %v", id, m)
	}
	return m["runId"].(string)
}

// execute executes the run as the executor does and returns it as stored.
func (s *replayRetryStack) execute(t *testing.T, id string) runs.Run {
	t.Helper()
	if err := s.x.Execute(context.Background(), id); err != nil {
		t.Fatalf("execute %s: %v", id, err)
	}
	return s.get(t, id)
}

func (s *replayRetryStack) get(t *testing.T, id string) runs.Run {
	t.Helper()
	r, err := s.rs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// effectFailures are the error codes of the effect node's node.failed
// events in r's own log.
func effectFailures(r runs.Run) []string {
	var out []string
	for _, e := range r.Log {
		if e.NodeID == "effect" && e.Type == runs.EventNodeFailed {
			var p struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			out = append(out, p.Error.Code)
		}
	}
	return out
}

// sameFork fails unless got carries want's fork description: its source,
// mode, fromSeq, inherited prefix, ancestry and recorded events, and
// want's recipe stamps.
func sameFork(t *testing.T, what string, got, want runs.Run) {
	t.Helper()
	g, _ := json.Marshal(got.Fork)
	w, _ := json.Marshal(want.Fork)
	if got.Fork == nil || string(g) != string(w) || got.Stamps != want.Stamps {
		t.Fatalf("%s: fork %s stamps %+v; want the failed fork's %s stamps %+v", what, g, got.Stamps, w, want.Stamps)
	}
}

// retryOfFailedReplayFork: a source of the looped fixture whose effect the
// receiver refuses (400) fails after one delivery; its replay fork from
// after the start node resolves the effect from the source's record
// (fails with it, nothing sent); a retry of the fork is a replay fork of
// the same source from the same point: it fails the same way and sends
// nothing. Its snapshot and events are valid against the closed v2
// schemas. A retry of a branch fork is a branch of the same source from the
// same point (RED_TEAM 471), re-firing what the branch re-fires. It
// returns the failed source and the failed replay fork.
func retryOfFailedReplayFork(t *testing.T, s *replayRetryStack) (src, rep runs.Run) {
	t.Helper()
	s.status.Store(http.StatusBadRequest)
	srcID := s.create(t, webhook.WorkflowReplayOrdinalLoop, `{"delayMs":0}`)
	if src = s.execute(t, srcID); src.Status != runs.StatusFailed || s.sent.Load() != 1 {
		t.Fatalf("source: %s, %d deliveries; want failed after one", src.Status, s.sent.Load())
	}
	repID := s.fork(t, srcID, `{"mode":"replay","fromSeq":3}`)
	if rep = s.execute(t, repID); rep.Status != runs.StatusFailed || s.sent.Load() != 1 {
		t.Fatalf("replay fork: %s, %d deliveries; want failed, nothing sent", rep.Status, s.sent.Load())
	}
	retryID := s.retry(t, repID)
	retry := s.get(t, retryID)
	sameFork(t, "the retry of the replay fork", retry, rep)
	if retry.RetryOf != repID || !retry.IsReplay() {
		t.Fatalf("the retry: retryOf %q, replay %v", retry.RetryOf, retry.IsReplay())
	}
	retry = s.execute(t, retryID)
	if n := s.sent.Load(); n != 1 {
		t.Fatalf("the retry of a failed replay fork sent the effect again: %d deliveries, want 1", n)
	}
	if retry.Status != runs.StatusFailed || fmt.Sprint(effectFailures(retry)) != fmt.Sprint(effectFailures(rep)) {
		t.Fatalf("the retry: %s, effect failures %v; want failed as the fork %v", retry.Status, effectFailures(retry), effectFailures(rep))
	}
	if w, err := s.l.Witness(context.Background(), retryID); err != nil || len(w.Effects) != 0 {
		t.Fatalf("the retry's witness: %+v, %v; want no attempt", w, err)
	}
	// What a client reads of the retry is valid against the closed
	// schemas: the snapshot, linked by on, and its events, the source's
	// prefix first.
	o := wireschema.Load(t)
	snap, _, err := o.Response("GET", "/runs/{runId}", 200)
	if err != nil {
		t.Fatal(err)
	}
	poll, _, err := o.Response("GET", "/runs/{runId}/events/poll", 200)
	if err != nil {
		t.Fatal(err)
	}
	r, m := s.f.do(t, ev("GET", "/runs/"+runs.ProjectID(retryID), "acme", "", ""))
	if err := wireschema.Validate(snap, []byte(r.Body)); r.StatusCode != 200 || err != nil {
		t.Fatalf("the retry's snapshot: %d %v\n%s", r.StatusCode, err, r.Body)
	}
	if ext, _ := m["extensions"].(map[string]any)[ExtensionRun].(map[string]any); ext[MemberOn] != repID {
		t.Fatalf("the retry's snapshot links %v, want on %s", ext[MemberOn], repID)
	}
	r, _ = s.f.do(t, ev("GET", "/runs/"+runs.ProjectID(retryID)+"/events/poll", "acme", "", ""))
	if err := wireschema.Validate(poll, []byte(r.Body)); r.StatusCode != 200 || err != nil {
		t.Fatalf("the retry's events: %d %v\n%s", r.StatusCode, err, r.Body)
	}
	srcEvs, retryEvs := rawEvents(t, s.f, srcID), rawEvents(t, s.f, retryID)
	for i := range 3 {
		var a, b map[string]any
		_ = json.Unmarshal(srcEvs[i], &a)
		_ = json.Unmarshal(retryEvs[i], &b)
		if b["eventId"] != eventID(retryID, int64(i)) || a["type"] != b["type"] || b["runId"] != retryID {
			t.Fatalf("the retry's event %d: %s, the source's %s", i, retryEvs[i], srcEvs[i])
		}
	}
	// A retry of a branch fork is a branch of the same source from the
	// same point (RED_TEAM 471): it sends what the branch sends.
	brID := s.fork(t, srcID, `{"mode":"branch","fromSeq":3}`)
	if br := s.execute(t, brID); br.Status != runs.StatusFailed || s.sent.Load() != 2 {
		t.Fatalf("branch fork: %s, %d deliveries; want failed after sending", br.Status, s.sent.Load())
	}
	brRetryID := s.retry(t, brID)
	if br := s.get(t, brRetryID); br.Fork == nil || br.Fork.Mode != runs.ForkBranch || br.Fork.SourceRunID != srcID || br.Fork.FromSeq != 3 {
		t.Fatalf("the retry of a branch fork: fork %+v, want a branch of the source from 3", br.Fork)
	}
	s.status.Store(http.StatusOK)
	if br := s.execute(t, brRetryID); br.Status != runs.StatusCompleted || s.sent.Load() != 4 {
		t.Fatalf("the retry of a branch fork: %s, %d deliveries; want completed, both executions re-fired (two more)", br.Status, s.sent.Load())
	}
	return src, rep
}

// retryOfReplayForkOfPausedSource: a source paused before its effect,
// forked in replay mode (the fork fails closed, replay_source_missing,
// nothing sent); the fork retried: the retry fails closed the same way and
// sends nothing; the source resumed: it sends, once. A retry of that
// failed retry, now that the source recorded its outcome, completes from
// the record and sends nothing: one delivery of the one business action.
func retryOfReplayForkOfPausedSource(t *testing.T, s *replayRetryStack) {
	t.Helper()
	srcID := s.create(t, webhook.WorkflowReplaySideEffect, `{"delayMs":0}`)
	s.post(t, "/runs/"+runs.ProjectID(srcID)+":pause", `{"reason":"hold"}`, 202)
	repID := s.fork(t, srcID, `{"mode":"replay"}`)
	rep := s.execute(t, repID)
	if rep.Status != runs.StatusFailed || fmt.Sprint(effectFailures(rep)) != "["+execfn.CodeReplaySourceMissing+"]" || s.sent.Load() != 0 {
		t.Fatalf("replay fork of the paused source: %s %v, %d deliveries; want failed closed, nothing sent", rep.Status, effectFailures(rep), s.sent.Load())
	}
	retryID := s.retry(t, repID)
	sameFork(t, "the retry of the replay fork", s.get(t, retryID), rep)
	retry := s.execute(t, retryID)
	if n := s.sent.Load(); n != 0 {
		t.Fatalf("the retry of the replay fork sent the effect the replay suppressed: %d deliveries", n)
	}
	if retry.Status != runs.StatusFailed || fmt.Sprint(effectFailures(retry)) != "["+execfn.CodeReplaySourceMissing+"]" {
		t.Fatalf("the retry: %s %v; want failed closed with %s", retry.Status, effectFailures(retry), execfn.CodeReplaySourceMissing)
	}
	s.post(t, "/runs/"+runs.ProjectID(srcID)+":resume", `{}`, 202)
	if src := s.execute(t, srcID); src.Status != runs.StatusCompleted || s.sent.Load() != 1 {
		t.Fatalf("the resumed source: %s, %d deliveries; want completed after one", src.Status, s.sent.Load())
	}
	againID := s.retry(t, retryID)
	sameFork(t, "the retry of the retry", s.get(t, againID), rep)
	if again := s.execute(t, againID); again.Status != runs.StatusCompleted || s.sent.Load() != 1 {
		t.Fatalf("the retry of the retry: %s %v (%s), %d deliveries; want completed from the source's record, nothing sent",
			again.Status, effectFailures(again), again.Error, s.sent.Load())
	}
}

// TestRetryOfFailedReplayForkSendsNothing: RED_TEAM 442, the first
// observation, on runs and a ledger in memory.
func TestRetryOfFailedReplayForkSendsNothing(t *testing.T) {
	retryOfFailedReplayFork(t, memReplayRetryStack(t))
}

// TestRetryOfReplayForkOfPausedSourceSendsOnce: RED_TEAM 442, the second
// observation, in memory.
func TestRetryOfReplayForkOfPausedSourceSendsOnce(t *testing.T) {
	retryOfReplayForkOfPausedSource(t, memReplayRetryStack(t))
}

// TestRetryOfReplayForkDynamo: both observations on the three emulators,
// the retry's fork written by each of RunsTable's create paths (its own
// conditional PutItem after its listing; in the completion transaction,
// on the engines that have transactions) and read back by the executor. A retry of a replay fork costs the round
// trips a retry of a plain failed run costs: the fork description comes
// from the failed fork as read.
func TestRetryOfReplayForkDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, transactional := range []bool{false, true} {
			if transactional && !e.Caps.Transactions {
				continue // no TransactWriteItems on this engine (dynalite)
			}
			t.Run(fmt.Sprintf("transactional=%v", transactional), func(t *testing.T) {
				s, cnt := dynamoReplayRetryStack(t, e, transactional)
				src, rep := retryOfFailedReplayFork(t, s)
				cnt.Reset()
				s.retry(t, src.ID)
				plain, plainOps := cnt.Total(), cnt.Ops()
				cnt.Reset()
				s.retry(t, rep.ID)
				if got, ops := cnt.Total(), cnt.Ops(); got != plain {
					t.Fatalf("a retry of a replay fork: %d calls %v; a retry of a plain failed run %d %v", got, ops, plain, plainOps)
				}
				s2, _ := dynamoReplayRetryStack(t, e, transactional)
				retryOfReplayForkOfPausedSource(t, s2)
			})
		}
	})
}
