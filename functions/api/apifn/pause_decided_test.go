package apifn

// Offline-decided pauses and resumes (RED_TEAM 386): pauseRun and
// resumeRun honour Idempotency-Decided-Version and If-Match as cancelRun
// does. A pause or resume decided against a version of the run whose
// status changed since is refused 409 idemkit.stale_decision with the fix
// and waits in the caller's inbox, whose resubmission pauses (with the
// refused pause's drain policy and reason) or resumes, and whose discard
// drops it. In memory and on every emulator.

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// decidedPost is a commerce request POSTing body to path under key,
// decided against version (Idempotency-Decided-Version).
func decidedPost(path, key, body string, version int64) events.APIGatewayV2HTTPRequest {
	e := commerceReq("POST", path, key)
	if version > 0 {
		e.Headers["idempotency-decided-version"] = strconv.FormatInt(version, 10)
	}
	if body != "" {
		e.Body, e.Headers["content-type"] = body, "application/json"
	}
	return e
}

// runningRun creates acme's run and starts it: version 1 pending, 2
// running.
func runningRun(t *testing.T, rs runs.RunStore) runs.Run {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{"n":1}`), time.Now())
	if err := rs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	r, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// staleRefusal checks a 409 idemkit.stale_decision: decided against
// decidedV, the run now at currentV, its one change the status from old
// to new; it returns the inbox entry id (details.inboxId).
func staleRefusal(t *testing.T, r events.APIGatewayV2HTTPResponse, m map[string]any, runID string, decidedV, currentV int64, old, new string) string {
	t.Helper()
	d, _ := m["details"].(map[string]any)
	changes, _ := d["changes"].([]any)
	if r.StatusCode != http.StatusConflict || m["error"] != decided.CodeStale || d["recordId"] != runID ||
		d["decidedVersion"] != float64(decidedV) || d["currentVersion"] != float64(currentV) || len(changes) == 0 {
		t.Fatalf("want 409 %s decided %d, current %d: %d %s", decided.CodeStale, decidedV, currentV, r.StatusCode, r.Body)
	}
	ch, _ := changes[0].(map[string]any)
	if ch["field"] != runs.FieldStatus || ch["old"] != old || ch["new"] != new {
		t.Fatalf("the fix: %v, want status %s -> %s", changes, old, new)
	}
	id, _ := d["inboxId"].(string)
	if id == "" {
		t.Fatalf("the refusal names no inbox entry: %s", r.Body)
	}
	return id
}

// inboxEntry is the caller's listed inbox entry id.
func inboxEntry(t *testing.T, f *fixture, id string) map[string]any {
	t.Helper()
	for _, x := range listInbox(t, f) {
		if e, _ := x.(map[string]any); e["id"] == id {
			return e
		}
	}
	t.Fatalf("entry %s is not in the inbox", id)
	return nil
}

// TestDecidedPauseRefusedWhenTheStatusChanged: a pause decided against
// the run's version 1 (pending) after it started running is refused 409
// idemkit.stale_decision with the fix, the run untouched; the same key
// replays the refusal; the pause waits in the caller's inbox as a
// pauseRun with its reason and drain policy; its resubmission pauses the
// run with them (run.paused echoes both) and leaves the inbox.
func TestDecidedPauseRefusedWhenTheStatusChanged(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		run := runningRun(t, rs)
		const body = `{"reason":"nightly","drainPolicy":"immediate"}`
		req := decidedPost(pausePath(run.ID), "decided pause 1", body, 1)
		r, m := f.do(t, req)
		id := staleRefusal(t, r, m, run.ID, 1, 2, "pending", "running")
		if got, _ := rs.Get(context.Background(), run.ID); got.Status != runs.StatusRunning || got.Version != 2 {
			t.Fatalf("the refused pause moved the run: %s at %d", got.Status, got.Version)
		}
		again, _ := f.do(t, decidedPost(pausePath(run.ID), "decided pause 1", body, 1))
		if again.StatusCode != r.StatusCode || again.Body != r.Body || again.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("the same key: %d %s %v, want the refusal replayed", again.StatusCode, again.Body, again.Headers)
		}
		en := inboxEntry(t, f, id)
		if en["operation"] != OpPauseRun || en["recordId"] != run.ID || en["reason"] != "nightly" || en["drainPolicy"] != runs.DrainImmediate || en["currentVersion"] != 2.0 {
			t.Fatalf("the inbox entry: %v", en)
		}
		res, rm := f.do(t, commerceReq("POST", "/inbox/"+id+"/resubmit", "resubmit pause 1"))
		if res.StatusCode != http.StatusAccepted || rm["status"] != "paused" || rm["runId"] != run.ID {
			t.Fatalf("the resubmission: %d %s, want 202 paused", res.StatusCode, res.Body)
		}
		if pl := eventPayload(t, f, run.ID, runs.EventRunPaused); pl["drainPolicy"] != runs.DrainImmediate || pl["reason"] != "nightly" {
			t.Fatalf("run.paused payload %v, want the refused pause's drain policy and reason", pl)
		}
		if es := listInbox(t, f); len(es) != 0 {
			t.Fatalf("the resubmitted pause stayed: %v", es)
		}
		replay, _ := f.do(t, commerceReq("POST", "/inbox/"+id+"/resubmit", "resubmit pause 1"))
		if replay.StatusCode != res.StatusCode || replay.Body != res.Body {
			t.Fatalf("the resubmission's key: %d %s", replay.StatusCode, replay.Body)
		}
	})
}

// TestDecidedResumeRefusedWhenTheStatusChanged: a resume decided (by
// If-Match, the snapshot's ETag) while the run was paused, after another
// request resumed and paused it again since, is refused 409
// idemkit.stale_decision and waits as a resumeRun with its reason; a
// resubmission after yet another change is refused again and the entry
// waits, updated; its discard drops it, the run left paused; a resume
// decided against the current version resumes it.
func TestDecidedResumeRefusedWhenTheStatusChanged(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		ps := rs.(runs.PauseStore)
		ctx := context.Background()
		run := runningRun(t, rs)
		if _, err := ps.Pause(ctx, run.ID, runs.Pause{By: "operator"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		g, _ := f.do(t, commerceReq("GET", "/runs/"+runs.ProjectID(run.ID), ""))
		etag := g.Headers["ETag"]
		if g.StatusCode != 200 || etag == "" {
			t.Fatalf("GET: %d %v", g.StatusCode, g.Headers)
		}
		if _, err := ps.Unpause(ctx, run.ID, "another", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := ps.Pause(ctx, run.ID, runs.Pause{By: "another"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		req := decidedPost(resumePath(run.ID), "decided resume 1", `{"reason":"approved"}`, 0)
		req.Headers["if-match"] = etag
		r, m := f.do(t, req)
		id := staleRefusal(t, r, m, run.ID, 3, 5, "paused", "paused")
		if got, _ := rs.Get(ctx, run.ID); got.Status != runs.StatusPaused || got.Version != 5 {
			t.Fatalf("the refused resume moved the run: %s at %d", got.Status, got.Version)
		}
		if en := inboxEntry(t, f, id); en["operation"] != OpResumeRun || en["reason"] != "approved" {
			t.Fatalf("the inbox entry: %v", en)
		}
		if _, ok := inboxEntry(t, f, id)["drainPolicy"]; ok {
			t.Fatal("a resume's entry lists a drain policy")
		}
		// Resumed and paused again before the resubmission: refused again.
		if _, err := ps.Unpause(ctx, run.ID, "third", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := ps.Pause(ctx, run.ID, runs.Pause{By: "third"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		again, am := f.do(t, commerceReq("POST", "/inbox/"+id+"/resubmit", "resubmit resume 1"))
		if staleRefusal(t, again, am, run.ID, 5, 7, "paused", "paused") != id {
			t.Fatalf("the resubmission refused again names another entry: %s", again.Body)
		}
		if en := inboxEntry(t, f, id); en["currentVersion"] != 7.0 || en["operation"] != OpResumeRun || en["reason"] != "approved" {
			t.Fatalf("the entry after the second refusal: %v", en)
		}
		if d, dm := f.do(t, commerceReq("POST", "/inbox/"+id+"/discard", "discard resume 1")); d.StatusCode != 200 || dm["status"] != "discarded" {
			t.Fatalf("discard: %d %s", d.StatusCode, d.Body)
		}
		if got, _ := rs.Get(ctx, run.ID); got.Status != runs.StatusPaused || got.Version != 7 {
			t.Fatalf("the discarded resume ran: %s at %d", got.Status, got.Version)
		}
		ok, om := f.do(t, decidedPost(resumePath(run.ID), "decided resume 2", "", 7))
		if ok.StatusCode != http.StatusAccepted || om["status"] != "running" {
			t.Fatalf("a resume decided against the current version: %d %s", ok.StatusCode, ok.Body)
		}
	})
}

// TestDecidedPauseRunsWhenNothingItReadsChanged: a pause decided against
// an earlier version whose later changes touch no status (a transient
// failure noted: lastError) is applied, and so is a resume decided
// against the paused version; nothing waits in the inbox. A version the
// run never had is 400 validation_error naming the header that carried
// it, the run untouched.
func TestDecidedPauseRunsWhenNothingItReadsChanged(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		ctx := context.Background()
		run := runningRun(t, rs)
		if _, err := rs.NoteFailure(ctx, run.ID, "transient", time.Now()); err != nil {
			t.Fatal(err)
		}
		if noted, _ := rs.Get(ctx, run.ID); noted.Version != 3 {
			t.Fatalf("after a noted failure: version %d, want 3", noted.Version)
		}
		for _, c := range []struct {
			name  string
			req   events.APIGatewayV2HTTPRequest
			field string
		}{
			{"Idempotency-Decided-Version", decidedPost(pausePath(run.ID), "ahead 1", "", 4), decided.Header},
			{"If-Match", func() events.APIGatewayV2HTTPRequest {
				r := decidedPost(pausePath(run.ID), "ahead 2", "", 0)
				r.Headers["if-match"] = decided.VersionETag(9)
				return r
			}(), decided.HeaderIfMatch},
		} {
			r, m := f.do(t, c.req)
			if d, _ := m["details"].(map[string]any); r.StatusCode != 400 || m["error"] != "validation_error" || d["field"] != c.field {
				t.Fatalf("%s ahead of the run: %d %s", c.name, r.StatusCode, r.Body)
			}
		}
		if got, _ := rs.Get(ctx, run.ID); got.Version != 3 || got.Status != runs.StatusRunning {
			t.Fatalf("a refused pause moved the run: %s at %d", got.Status, got.Version)
		}
		p, pm := f.do(t, decidedPost(pausePath(run.ID), "decided pause ok", `{"reason":"r"}`, 2))
		if p.StatusCode != http.StatusAccepted || pm["status"] != "paused" {
			t.Fatalf("a pause decided before an unrelated change: %d %s", p.StatusCode, p.Body)
		}
		res, rm := f.do(t, decidedPost(resumePath(run.ID), "decided resume ok", "", 4))
		if res.StatusCode != http.StatusAccepted || rm["status"] != "running" {
			t.Fatalf("a resume decided against the paused version: %d %s", res.StatusCode, res.Body)
		}
		if es := listInbox(t, f); len(es) != 0 {
			t.Fatalf("the inbox holds %v", es)
		}
		// A pause decided against a version whose status is the run's
		// again (paused and resumed since) is still stale: the status
		// changed in between.
		r, m := f.do(t, decidedPost(pausePath(run.ID), "decided pause aba", "", 3))
		staleRefusal(t, r, m, run.ID, 3, 5, "running", "running")
	})
}

// TestDecidedPauseRetriedAfterCrashKeepsIts202: a decided pause (and
// resume) that wrote the run and died before its Layer-1 record was
// completed is retried under the same key: it finds its own write and
// answers 202 again, never a stale refusal for the change it made itself.
func TestDecidedPauseRetriedAfterCrashKeepsIts202(t *testing.T) {
	p := loadPauseOracle(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, inner := backendStores(t, e)
		for i, path := range []func(string) string{pausePath, resumePath} {
			clk := clock.NewManual(time.Now())
			st := &lostCompletion{Store: inner}
			f := hostOf(t, rs, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, nil)
			run := runningRun(t, rs)
			want := "paused"
			if i == 1 {
				if _, err := rs.(runs.PauseStore).Pause(context.Background(), run.ID, runs.Pause{By: "op"}, time.Now()); err != nil {
					t.Fatal(err)
				}
				want = "running"
			}
			before, _ := rs.Get(context.Background(), run.ID)
			key := "k-decided-crash-0123456789abcdef-" + strconv.Itoa(i)
			f.do(t, decidedPost(path(run.ID), key, "", before.Version))
			clk.Advance(idem.DefaultLease + time.Second)
			r, _ := f.do(t, decidedPost(path(run.ID), key, "", before.Version))
			accepted(t, []*jsonschema.Schema{p.pause, p.resume}[i], events202{r.StatusCode, r.Body}, want)
			if got, _ := rs.Get(context.Background(), run.ID); got.Version != before.Version+1 {
				t.Fatalf("the retry wrote again: version %d, want %d", got.Version, before.Version+1)
			}
		}
	})
}

// TestDecidedPauseResumeRoundTrips: a decided pause and resume that pass
// their check cost what an undecided one does, two RunsTable round trips
// (the check rides the store's own read and conditional write), and a
// refused one as many (the inbox's own write aside).
func TestDecidedPauseResumeRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		f := hostOf(t, rs, idem.Config{Store: idemmem.New()}, nil)
		run := bulkRun(t, rs, "acme", runs.StatusRunning)
		for i, path := range []string{pausePath(run.ID), resumePath(run.ID)} {
			cur, _ := rs.Get(context.Background(), run.ID)
			req := ev("POST", path, "acme", "k-dtrips-"+strconv.Itoa(i)+"-0123456789abcdef", "")
			req.Headers["idempotency-decided-version"] = strconv.FormatInt(cur.Version, 10)
			cnt.Reset()
			if r, _ := f.do(t, req); r.StatusCode != 202 {
				t.Fatalf("%s: %d %s", path, r.StatusCode, r.Body)
			}
			if n, ops := cnt.Total(), cnt.Ops(); n != 2 || ops["GetItem"] != 1 || ops["UpdateItem"] != 1 {
				t.Errorf("decided %s took %d round trips %v, want 2 (a GetItem and an UpdateItem)", path, n, ops)
			}
		}
	})
}

// guardedRuns is a run store that pauses runs under a guard.
type guardedRuns interface {
	runs.RunStore
	runs.GuardedPauseStore
}

// pauseLoser is a guardedRuns that, when armed, loses the answer of the
// next guarded pause that landed (the write applied, the caller sees an
// error).
type pauseLoser struct {
	guardedRuns
	mu   sync.Mutex
	lose bool
}

func (s *pauseLoser) PauseGuarded(ctx context.Context, id string, p runs.Pause, g runs.Guard, now time.Time) (runs.Run, error) {
	r, err := s.guardedRuns.PauseGuarded(ctx, id, p, g, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.lose {
		s.lose = false
		return runs.Run{}, errLost
	}
	return r, err
}

// TestInboxPauseResubmissionRetriedAfterItsPauseLanded: a resubmitted
// pause whose write landed but whose answer was lost (5xx) is retried with
// its Idempotency-Key: the run holds its own pause, so the retry answers
// 202 paused, the run is not paused again, and the entry is resubmitted.
func TestInboxPauseResubmissionRetriedAfterItsPauseLanded(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		var pl *pauseLoser
		f, rs := inboxHost(t, e, func(c *Config) {
			pl = &pauseLoser{guardedRuns: c.Runs.(guardedRuns)}
			c.Runs = pl
		})
		run := runningRun(t, rs)
		r, m := f.do(t, decidedPost(pausePath(run.ID), "queued pause own", `{"drainPolicy":"immediate"}`, 1))
		id := staleRefusal(t, r, m, run.ID, 1, 2, "pending", "running")
		pl.mu.Lock()
		pl.lose = true
		pl.mu.Unlock()
		if st, _, body := post(t, f, "resubmission", resubmitReq(id, "resubmit pause own")); st < 500 {
			t.Fatalf("the resubmission whose pause's answer was lost: %d %s", st, body)
		}
		landed, err := rs.Get(context.Background(), run.ID)
		if err != nil || landed.Status != runs.StatusPaused || landed.Version != 3 {
			t.Fatalf("the run after the lost answer: %s at %d %v", landed.Status, landed.Version, err)
		}
		st, m2, body := post(t, f, "resubmission", resubmitReq(id, "resubmit pause own"))
		if st != http.StatusAccepted || m2["status"] != "paused" || m2["runId"] != run.ID {
			t.Fatalf("the retried resubmission after its own pause landed: %d %s, want 202 paused", st, body)
		}
		if got, _ := rs.Get(context.Background(), run.ID); got.Version != 3 || got.Status != runs.StatusPaused {
			t.Fatalf("the retry wrote again: %s at %d", got.Status, got.Version)
		}
		if s := entryState(t, f, id, "discard after pause own"); s != "resubmitted" {
			t.Fatalf("the entry is %s, want resubmitted", s)
		}
	})
}

// unguarded is a run store that pauses runs but takes no guard (it is
// not a runs.GuardedPauseStore).
type unguarded struct {
	runs.RunStore
	ps runs.PauseStore
}

// unguarded must stay a runs.PauseStore, or the host serves no pause
// behind it and the test below checks a 404.
var _ runs.PauseStore = unguarded{}

func (u unguarded) Pause(ctx context.Context, id string, p runs.Pause, now time.Time) (runs.Run, error) {
	return u.ps.Pause(ctx, id, p, now)
}

func (u unguarded) Unpause(ctx context.Context, id, by, reason string, now time.Time) (runs.Run, error) {
	return u.ps.Unpause(ctx, id, by, reason, now)
}

func (u unguarded) ReleaseStalePause(ctx context.Context, r runs.Run, before, now time.Time) (runs.Run, error) {
	return u.ps.ReleaseStalePause(ctx, r, before, now)
}

// TestDecidedPauseOnAStoreWithoutGuards: behind a run store that pauses
// runs but takes no guard, a decided pause or resume is still checked, on
// a read of the run before its write (as a cancel is): a stale one is
// refused 409 and kept in the inbox, one whose run did not change in its
// inputs runs, and the retry of one that applied finds its own write.
func TestDecidedPauseOnAStoreWithoutGuards(t *testing.T) {
	mem := runs.NewMemRuns()
	rs := unguarded{RunStore: mem, ps: mem}
	clk := clock.NewManual(time.Now())
	st := &lostCompletion{Store: idemmem.New()}
	f := hostOf(t, rs, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, nil)
	run := runningRun(t, rs)
	r, m := f.do(t, decidedPost(pausePath(run.ID), "k-unguarded-stale-0123456789abcdef", "", 1))
	staleRefusal(t, r, m, run.ID, 1, 2, "pending", "running")
	// The refusal's completion was the one lost: its key's retry re-runs
	// the check, refused again.
	clk.Advance(idem.DefaultLease + time.Second)
	r, m = f.do(t, decidedPost(pausePath(run.ID), "k-unguarded-stale-0123456789abcdef", "", 1))
	staleRefusal(t, r, m, run.ID, 1, 2, "pending", "running")
	p, pm := f.do(t, decidedPost(pausePath(run.ID), "k-unguarded-pause-0123456789abcdef", "", 2))
	if p.StatusCode != http.StatusAccepted || pm["status"] != "paused" {
		t.Fatalf("a pause decided against the current version: %d %s", p.StatusCode, p.Body)
	}
	res, rm := f.do(t, decidedPost(resumePath(run.ID), "k-unguarded-resume-0123456789abcd", "", 1))
	if res.StatusCode != http.StatusConflict || rm["error"] != decided.CodeStale {
		t.Fatalf("a resume decided before the pause: %d %s", res.StatusCode, res.Body)
	}
	if got, _ := rs.Get(context.Background(), run.ID); got.Status != runs.StatusPaused || got.Version != 3 {
		t.Fatalf("the run: %s at %d, want paused at 3", got.Status, got.Version)
	}
	if n := len(listInbox(t, f)); n != 2 {
		t.Fatalf("the inbox holds %d entries, want the stale pause and resume", n)
	}
}

// TestDecidedPauseRacesAnotherPauseAndResume: a pause decided against the
// run's current version races another caller's pause and resume through
// the api, each under its own key. Whichever lands first, the decided
// pause is applied only as the run's first change after its version (its
// run.paused, carrying its reason, is the run's first), and is otherwise
// refused 409 idemkit.stale_decision, never applied after the other
// caller's change it did not see.
func TestDecidedPauseRacesAnotherPauseAndResume(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		for round := range 4 {
			run := runningRun(t, rs)
			var decidedResp events.APIGatewayV2HTTPResponse
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				decidedResp, _ = f.h.Handle(context.Background(), decidedPost(pausePath(run.ID), "decided race "+strconv.Itoa(round), `{"reason":"decided"}`, run.Version))
			}()
			go func() {
				defer wg.Done()
				<-start
				_, _ = f.h.Handle(context.Background(), decidedPost(pausePath(run.ID), "other pause "+strconv.Itoa(round), `{"reason":"other"}`, 0))
				_, _ = f.h.Handle(context.Background(), decidedPost(resumePath(run.ID), "other resume "+strconv.Itoa(round), "", 0))
			}()
			close(start)
			wg.Wait()
			got, err := rs.Get(context.Background(), run.ID)
			if err != nil {
				t.Fatal(err)
			}
			var first map[string]any
			for _, ev := range got.Log {
				if ev.Type == runs.EventRunPaused {
					_ = json.Unmarshal(ev.Payload, &first)
					break
				}
			}
			if got.PausePending != nil && first == nil {
				_ = json.Unmarshal(got.PausePending.Payload, &first)
			}
			var m map[string]any
			_ = json.Unmarshal([]byte(decidedResp.Body), &m)
			switch {
			case decidedResp.StatusCode == http.StatusAccepted:
				if first["reason"] != "decided" {
					t.Fatalf("round %d: the decided pause answered 202 but the run's first pause is %v", round, first)
				}
			case decidedResp.StatusCode == http.StatusConflict && m["error"] == decided.CodeStale:
				if first["reason"] != "other" {
					t.Fatalf("round %d: the decided pause was refused stale but the run's first pause is %v", round, first)
				}
			default:
				t.Fatalf("round %d: the decided pause: %d %s", round, decidedResp.StatusCode, decidedResp.Body)
			}
		}
	})
}

// TestDecidedCancelRefusedWhenTheRunMovedBeforeItsWrite: another request
// pauses and resumes the run between a decided cancel's check and its
// write, leaving the status as the cancel read it: the cancel is refused
// 409 idemkit.stale_decision (the status changed since its version), not
// applied; a change of no input between the check and the write (a
// transient failure noted) is checked again and the cancel runs.
func TestDecidedCancelRefusedWhenTheRunMovedBeforeItsWrite(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs, _, spy := retryHost(t, e)
		ctx := context.Background()
		ps := rs.(runs.PauseStore)
		run := runningRun(t, rs)
		var once sync.Once
		spy.mu.Lock()
		spy.before = func(string) {
			once.Do(func() {
				if _, err := ps.Pause(ctx, run.ID, runs.Pause{By: "other"}, time.Now()); err != nil {
					t.Error(err)
				}
				if _, err := ps.Unpause(ctx, run.ID, "other", "", time.Now()); err != nil {
					t.Error(err)
				}
			})
		}
		spy.mu.Unlock()
		r, m := f.do(t, decidedCancel(run.ID, 2, "queued cancel moved"))
		staleRefusal(t, r, m, run.ID, 2, 4, "running", "running")
		if got, _ := rs.Get(ctx, run.ID); got.Status != runs.StatusRunning || got.Version != 4 {
			t.Fatalf("the refused cancel moved the run: %s at %d", got.Status, got.Version)
		}
		other := runningRun(t, rs)
		var once2 sync.Once
		spy.mu.Lock()
		spy.before = func(string) {
			once2.Do(func() {
				if _, err := rs.NoteFailure(ctx, other.ID, "transient", time.Now()); err != nil {
					t.Error(err)
				}
			})
		}
		spy.mu.Unlock()
		if r, m := f.do(t, decidedCancel(other.ID, 2, "queued cancel noted")); r.StatusCode != 200 || m["status"] != "cancelled" {
			t.Fatalf("a cancel whose run changed in no input before its write: %d %s", r.StatusCode, r.Body)
		}
		if got, _ := rs.Get(ctx, other.ID); got.Status != runs.StatusCancelled || got.Version != 4 {
			t.Fatalf("the run: %s at %d, want cancelled at 4", got.Status, got.Version)
		}
	})
}
