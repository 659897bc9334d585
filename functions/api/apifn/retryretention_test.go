package apifn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestRetryOfReplayForkPastTheRetentionIsRefused (RED_TEAM 510): a retry
// of a failed replay fork is itself a replay fork of the same source from
// the same point (RED_TEAM 442), resolving its executions from the same
// records, so past the fork retention it is refused exactly as a fresh
// replay fork from that point is (RED_TEAM 470): 422 fork_point_invalid,
// details {sourceRunId, fromSeq, boundary} naming the source and the
// boundary of the records it resolves from, the error envelope, and no
// run created or listed. Inside the retention it is 201 as before; a
// retry of a branch fork, and of a run that is no fork, past it too.
func TestRetryOfReplayForkPastTheRetentionIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	envelope, err := wireschema.Load(t).Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	at := func(d time.Duration) {
		f.h.clock = ledgertest.ClockFuncs{NowFunc: func() time.Time { return src.CreatedAt.Add(d) }, SleepFunc: f.h.clock.Sleep}
	}
	failedFork := func(mode, key string) runs.Run {
		t.Helper()
		at(DefaultForkRetention - 4*24*time.Hour)
		r, m := f.fork(t, src.ID, key, `{"mode":"`+mode+`","fromSeq":5}`)
		id, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || id == "" {
			t.Fatalf("%s fork inside the retention: %d %v", mode, r.StatusCode, m)
		}
		failed, err := f.runs.Transition(ctx, id, []runs.Status{runs.StatusPending}, runs.StatusFailed, "failed", f.h.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return failed
	}
	retry := func(id, key string) (int, map[string]any, string) {
		t.Helper()
		r, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(id)+"/retry", "acme", key, ""))
		return r.StatusCode, m, r.Body
	}

	inside := failedFork("replay", "k-retry-retention-inside-fork")
	at(DefaultForkRetention - time.Hour)
	if st, m, _ := retry(inside.ID, "k-retry-retention-inside"); st != http.StatusCreated {
		t.Fatalf("retry of a replay fork inside the retention: %d %v", st, m)
	}

	past := failedFork("replay", "k-retry-retention-past-fork")
	at(DefaultForkRetention + time.Hour)
	before := f.runs.Len()
	st, m, body := retry(past.ID, "k-retry-retention-past")
	d, _ := m["details"].(map[string]any)
	wantBoundary := src.CreatedAt.Add(DefaultForkRetention).UTC().Format(time.RFC3339Nano)
	if st != http.StatusUnprocessableEntity || m["error"] != CodeForkPointInvalid || d["sourceRunId"] != src.ID ||
		d["fromSeq"] != 5.0 || d["boundary"] != wantBoundary {
		t.Fatalf("retry of a replay fork past the retention: %d %v; want 422 %s, sourceRunId %s, fromSeq 5, boundary %s",
			st, m, CodeForkPointInvalid, src.ID, wantBoundary)
	}
	if err := wireschema.Validate(envelope, []byte(body)); err != nil {
		t.Fatalf("not an error envelope: %v\n%s", err, body)
	}
	// Exactly what a fresh replay fork from that point is answered.
	fr, fm := f.fork(t, src.ID, "k-retry-retention-fresh", `{"mode":"replay","fromSeq":5}`)
	if fr.StatusCode != st || fm["error"] != m["error"] || fm["message"] != m["message"] {
		t.Fatalf("fresh replay fork from the same point: %d %v; the retry: %d %v", fr.StatusCode, fm, st, m)
	}
	if n := f.runs.Len(); n != before {
		t.Fatalf("a refused retry created %d runs", n-before)
	}
	if got, err := f.runs.Get(ctx, past.ID); err != nil || len(got.Retries) != 0 {
		t.Fatalf("the refused retry was listed: %v %v", got.Retries, err)
	}

	branch := failedFork("branch", "k-retry-retention-branch-fork")
	at(DefaultForkRetention + time.Hour)
	if st, m, _ := retry(branch.ID, "k-retry-retention-branch"); st != http.StatusCreated {
		t.Fatalf("retry of a branch fork past the retention: %d %v", st, m)
	}
	plain, err := f.runs.Get(ctx, src.ID)
	if err != nil {
		t.Fatal(err)
	}
	plain = runs.NewRun("acme", plain.WorkflowID, plain.Inputs, src.CreatedAt)
	if err := f.runs.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runs.Transition(ctx, plain.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "failed", src.CreatedAt); err != nil {
		t.Fatal(err)
	}
	if st, m, _ := retry(plain.ID, "k-retry-retention-plain"); st != http.StatusCreated {
		t.Fatalf("retry of a plain run past the retention: %d %v", st, m)
	}
}
