package apifn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// panickyRuns is a run store whose Cancel of one id panics.
type panickyRuns struct {
	runs.RunStore
	bad string
}

func (p panickyRuns) Cancel(ctx context.Context, id string, from []runs.Status, by, reason string, now time.Time) (runs.Run, error) {
	if id == p.bad {
		panic("injected: a run store's Cancel panicked")
	}
	return p.RunStore.Cancel(ctx, id, from, by, reason, now)
}

// TestBulkCancelPanicOfOneIDIsTheRequestsPanic (RED_TEAM 351): a panic in
// the cancel of one id of a bulk cancel is the request's, answered as the
// same panic in a single cancel is (the Guard recovers it: 500, nothing
// recorded under the key), never a panic in a goroutine of its own that
// no recover reaches and that ends the process (every request idemkit dev
// serves, and the Lambda instance). The other ids are still cancelled
// before the answer. Before: the test binary died with the panic.
func TestBulkCancelPanicOfOneIDIsTheRequestsPanic(t *testing.T) {
	mem := runs.NewMemRuns()
	bad := bulkRun(t, mem, "acme", runs.StatusRunning)
	good := bulkRun(t, mem, "acme", runs.StatusRunning)
	f := hostOf(t, panickyRuns{RunStore: mem, bad: bad.ID}, idem.Config{}, nil)

	single, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(bad.ID)+"/cancel", "acme", "k-bulk-panic-single-0123456789", ""))
	if single.StatusCode != http.StatusInternalServerError {
		t.Fatalf("the single cancel's panic: %d %s, want 500", single.StatusCode, single.Body)
	}
	const key = "k-bulk-panic-0123456789abcdef"
	r, _ := f.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", good.ID, bad.ID)))
	if r.StatusCode != single.StatusCode {
		t.Fatalf("the bulk cancel's panic: %d %s, want %d as the single cancel's", r.StatusCode, r.Body, single.StatusCode)
	}
	if got, err := mem.Get(context.Background(), good.ID); err != nil || got.Status != runs.StatusCancelled {
		t.Errorf("the other id: %+v %v, want it cancelled", got, err)
	}
	// Nothing was recorded under the key: its retry runs again (the run
	// cancelled by its first attempt answers ok, the panicking id again
	// the request's 500).
	again, _ := f.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", good.ID, bad.ID)))
	if again.StatusCode != single.StatusCode || again.Headers["OpenWOP-Idempotent-Replay"] == "true" {
		t.Fatalf("the key's retry: %d %v %s, want %d run again", again.StatusCode, again.Headers, again.Body, single.StatusCode)
	}
}

// TestBulkCancelStoreFaultIsNeverTheKeysAnswer (RED_TEAM 352): a keyed
// bulk cancel whose runs table is out of reach for one id is answered
// 503 idemkit.store_unavailable with Retry-After, as a single cancel is,
// and nothing is recorded under its key: the key's retry, the store back,
// runs again and answers ok for every id (the runs the failed attempt
// cancelled through their canceller, the faulted one cancelled now), not
// a replay of the failure. Before: 200 with the faulted id's entry
// store_unavailable, kept under the key, so every retry of the key
// replayed it and the run stayed live. In memory and on every emulator.
func TestBulkCancelStoreFaultIsNeverTheKeysAnswer(t *testing.T) {
	o := wireschema.Load(t)
	const key = "k-bulk-fault-keyed-0123456789ab"
	check := func(t *testing.T, faulty, healed *fixture, rs runs.RunStore, ids []string) {
		r, m := faulty.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", ids...)))
		if r.StatusCode != http.StatusServiceUnavailable || m["error"] != idem.CodeStoreUnavailable || r.Headers[idem.HeaderRetryAfter] == "" {
			t.Fatalf("the faulted keyed bulk cancel: %d %v %s, want 503 %s with Retry-After", r.StatusCode, r.Headers, r.Body, idem.CodeStoreUnavailable)
		}
		for i, id := range ids {
			got, err := rs.Get(context.Background(), id)
			want := runs.StatusCancelled
			if i == 1 {
				want = runs.StatusRunning
			}
			if err != nil || got.Status != want {
				t.Errorf("run %d after the faulted attempt: %+v %v, want %s", i, got.Status, err, want)
			}
		}
		again, _ := healed.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", ids...)))
		if again.Headers["OpenWOP-Idempotent-Replay"] == "true" {
			t.Fatalf("the key's retry replayed: %d %s", again.StatusCode, again.Body)
		}
		for i, res := range bulkAnswer(t, o, again.StatusCode, again.Body) {
			if !res.OK || res.Status != "cancelled" || res.RunID != ids[i] {
				t.Errorf("the key's retry, entry %d: %+v, want ok cancelled", i, res)
			}
		}
		if got, err := rs.Get(context.Background(), ids[1]); err != nil || got.Status != runs.StatusCancelled {
			t.Errorf("the faulted run after the retry: %+v %v, want cancelled", got.Status, err)
		}
	}
	t.Run("memory", func(t *testing.T) {
		mem := runs.NewMemRuns()
		ids := []string{bulkRun(t, mem, "acme", runs.StatusRunning).ID, bulkRun(t, mem, "acme", runs.StatusRunning).ID, bulkRun(t, mem, "acme", runs.StatusPending).ID}
		st := idemmem.New()
		check(t, hostOf(t, faultyRuns{RunStore: mem, fail: ids[1]}, idem.Config{Store: st}, nil), hostOf(t, mem, idem.Config{Store: st}, nil), mem, ids)
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		plain := e.Client(dynamotest.FastRetries)
		table := e.CreateTable(t, "RunsTable")
		setup := &runs.DynamoRuns{Client: plain, Table: table}
		ids := []string{bulkRun(t, setup, "acme", runs.StatusRunning).ID, bulkRun(t, setup, "acme", runs.StatusRunning).ID, bulkRun(t, setup, "acme", runs.StatusPending).ID}
		faulty := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, failUpdateOf(ids[1])), Table: table}
		st, err := idemdynamo.New(idemdynamo.Config{Client: plain, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		check(t, hostOf(t, faulty, idem.Config{Store: st}, nil), hostOf(t, setup, idem.Config{Store: st}, nil), setup, ids)
	})
}
