package apifn

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestKeylessRetryCancelledWhileListed: a retry of a failed run sent
// without an Idempotency-Key, and a client that reads the failed run's
// retries at the moment the retry's run write is sent and cancels the
// id it lists. Under the completion transaction (RUNS_TRANSACTIONAL, the
// deployed default) the listing and the run's write were two writes: the
// cancel was answered 404, the run then written pending, and the retry
// answered 201 pending, for the executor to start a run its client had
// cancelled. They are now one TransactWriteItems: the id is never listed
// without its run, and a cancel of it is 200. Without the transaction the
// cancel's marker (RED_TEAM 345) has the run written cancelled. The
// retry costs, in the runs table, the read of the failed run and one
// TransactWriteItems under the transaction, 1 RCU and 4 WCU (it was that
// read, the listing's UpdateItem and the run's PutItem, 1 RCU and 2 WCU:
// a transactional write is billed twice), that read, the UpdateItem and
// the PutItem without it, and nothing in the idempotency table. On every
// engine, in each write mode it has.
func TestKeylessRetryCancelledWhileListed(t *testing.T) {
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			ctx := context.Background()
			const tenant = "acme"
			var f *fixture
			var failed runs.Run
			var cancelled []int
			var probe *runs.DynamoRuns
			cnt := dynamotest.NewCounter()
			meter := dynamotest.NewMeter(e.Client(), "pk")
			c := e.Client(dynamotest.FastRetries, cnt.Middleware())
			rs, st := dynamoStores(t, e, c, transactional)
			probe = &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: rs.Table}
			hooked := e.Client(dynamotest.FastRetries, cnt.Middleware(), meter.Middleware(), beforeRunWrite(rs.Table, func() {
				got, err := probe.Get(ctx, failed.ID)
				if err != nil {
					t.Error(err)
					return
				}
				for _, id := range got.Retries {
					r, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(id)+"/cancel", tenant, "", `{}`))
					cancelled = append(cancelled, r.StatusCode)
				}
			}))
			rs.Client = hooked
			f = hostOf(t, rs, idem.Config{Store: st}, nil)
			now := time.Now().UTC().Truncate(time.Millisecond)
			failed = runs.NewRun(tenant, "conformance-noop", nil, now)
			if err := probe.Create(ctx, failed); err != nil {
				t.Fatal(err)
			}
			if _, err := probe.Transition(ctx, failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", now); err != nil {
				t.Fatal(err)
			}

			cnt.Reset()
			resp, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "", ""))
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("the keyless retry: %d %s", resp.StatusCode, resp.Body)
			}
			id := runs.ProjectID(m["runId"].(string))
			got, err := probe.Get(ctx, m["runId"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(cancelled, http.StatusNotFound) && (got.Status != runs.StatusCancelled || m["status"] != "cancelled") {
				t.Fatalf("a cancel of the listed retry answered %v, and the retry was answered %v and written %s: a cancelled retry starts",
					cancelled, m["status"], got.Status)
			}
			if transactional && len(cancelled) != 0 {
				t.Fatalf("under the transaction the id was listed before its run's write was sent (cancels %v)", cancelled)
			}
			if !transactional && !slices.Equal(cancelled, []int{http.StatusNotFound}) {
				t.Fatalf("without the transaction the cancels made in between: %v, want one 404", cancelled)
			}
			if got.Status == runs.StatusPending {
				if r, m := f.do(t, ev("POST", "/runs/"+id+"/cancel", tenant, "", `{}`)); r.StatusCode != http.StatusOK || m["status"] != "cancelled" {
					t.Fatalf("a cancel of the listed retry: %d %s", r.StatusCode, r.Body)
				}
			}

			// Its cost, with nothing in between.
			cancelled = nil
			cnt.Reset()
			meter.Take()
			if resp, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "", "")); resp.StatusCode != http.StatusCreated {
				t.Fatalf("the keyless retry: %d %s", resp.StatusCode, resp.Body)
			}
			want := map[string]int{"GetItem": 1, "UpdateItem": 1, "PutItem": 1}
			if transactional {
				want = map[string]int{"GetItem": 1, "TransactWriteItems": 1}
			}
			if got := cnt.Ops(); !maps.Equal(got, want) {
				t.Errorf("a keyless retry cost %v; want %v", got, want)
			}
			// Two items of less than 1 KB written: 2 WCU, billed twice in a
			// transaction; the failed run's read, 1 RCU.
			u := meter.Take()
			wcu := map[bool]int{false: 2, true: 4}[transactional]
			t.Logf("a keyless retry: %v, %d/%d WCU, %d RCU, largest item %d B", u.Calls, u.WriteExisting, u.WriteLarger, u.Read, u.MaxItem)
			if u.WriteExisting != wcu || u.WriteLarger != wcu || u.Read != 1 {
				t.Errorf("a keyless retry: %d/%d WCU, %d RCU; want %d WCU and 1 RCU", u.WriteExisting, u.WriteLarger, u.Read, wcu)
			}
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}
