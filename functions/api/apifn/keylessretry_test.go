package apifn

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
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
// the PutItem without it, and nothing in the idempotency table. Its run
// write applied with its answer lost is answered 201 for that run, listed
// once. On every engine, in each write mode it has.
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
			faults := dynamotest.NewFaults()
			hooked := e.Client(dynamotest.FastRetries, faults.Middleware(), cnt.Middleware(), meter.Middleware(), beforeRunWrite(rs.Table, func() {
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

			// Its run write applied and its answer lost: the SDK's retry
			// finds it (or the engine answers the retried transaction as
			// applied), and the retry is 201 for that run, listed once.
			op := map[bool]string{false: "PutItem", true: "TransactWriteItems"}[transactional]
			faults.FailNextAfterSend(op, 1, dynamotest.ResponseLost())
			resp, m = f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "", ""))
			if resp.StatusCode != http.StatusCreated || faults.Pending() != 0 || m["status"] != "pending" {
				t.Fatalf("the keyless retry whose answer was lost: %d %s (fault met: %v)", resp.StatusCode, resp.Body, faults.Pending() == 0)
			}
			if got, err := probe.Get(ctx, failed.ID); err != nil || !slices.Contains(got.Retries, m["runId"].(string)) || len(got.Retries) != 3 {
				t.Fatalf("the failed run's retries %v (%v); want the lost answer's run among three", got.Retries, err)
			}
			if transactional {
				// Applied with its answer lost, then every later send
				// cancelled by racing retries' transactions until the store
				// gave up: 201 for the run it wrote (it was 503, its client
				// told to send again into a second run; RED_TEAM 371).
				faults.FailNextAfterSend(op, 1, dynamotest.ResponseLost())
				faults.FailNext(op, 3, &types.TransactionCanceledException{Message: aws.String("conflict"),
					CancellationReasons: []types.CancellationReason{{Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}}})
				resp, m = f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "", ""))
				if resp.StatusCode != http.StatusCreated || faults.Pending() != 0 || m["status"] != "pending" {
					t.Fatalf("the keyless retry whose answer was lost, then conflicted out: %d %s (faults met: %v)", resp.StatusCode, resp.Body, faults.Pending() == 0)
				}
				if got, err := probe.Get(ctx, failed.ID); err != nil || !slices.Contains(got.Retries, m["runId"].(string)) || len(got.Retries) != 4 {
					t.Fatalf("the failed run's retries %v (%v); want that run among four", got.Retries, err)
				}
			}
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}

// TestLayer1OffCancelMarkerOutlivesItsRequest: with Layer 1 off
// (a disabled Guard, IDEMPOTENCY_ENABLED=false) and the runs written by
// their own conditional writes, a cancel's marker expires
// (runs.DynamoRuns.MarkerRetention, a day, RED_TEAM 370), and the only
// write of a run at a retry's listed id is its own request's, which
// comes while the marker is there: a keyless retry cancelled between its
// listing and its run's write is answered 201 cancelled, the marker
// stamped with the handler's clock + a day. A day later (the clock moved
// past the marker's expiry) a retry of the same failed run is a new run
// id, so the expiry lets no cancelled run start: the cancelled one stays
// cancelled. On every engine.
func TestLayer1OffCancelMarkerOutlivesItsRequest(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		const tenant = "acme"
		const keep = 24 * time.Hour
		clk := clock.NewManual(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
		table := e.CreateTable(t, "RunsTable")
		probe := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: table, MarkerRetention: keep}
		var f *fixture
		var failed runs.Run
		var cancels []int
		var markerExp string
		rs := &runs.DynamoRuns{Table: table, MarkerRetention: keep}
		rs.Client = e.Client(dynamotest.FastRetries, beforeRunWrite(table, func() {
			got, err := probe.Get(ctx, failed.ID)
			if err != nil || len(got.Retries) != 1 {
				t.Errorf("the failed run at the retry's run write: %+v %v", got.Retries, err)
				return
			}
			r, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(got.Retries[0])+"/cancel", tenant, "", `{}`))
			cancels = append(cancels, r.StatusCode)
			out, err := e.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: got.Retries[0]}}})
			if err != nil {
				t.Error(err)
				return
			}
			if n, ok := out.Item["expiresAt"].(*types.AttributeValueMemberN); ok {
				markerExp = n.Value
			}
		}))
		f = hostOf(t, rs, idem.Config{Disabled: true}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
		failed = runs.NewRun(tenant, "conformance-noop", nil, clk.Now())
		if err := probe.Create(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if _, err := probe.Transition(ctx, failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", clk.Now()); err != nil {
			t.Fatal(err)
		}
		resp, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "", ""))
		if resp.StatusCode != http.StatusCreated || m["status"] != "cancelled" || !slices.Equal(cancels, []int{http.StatusNotFound}) {
			t.Fatalf("the retry cancelled between its listing and its run's write: %d %s (cancels %v); want 201 cancelled after one 404", resp.StatusCode, resp.Body, cancels)
		}
		if want := strconv.FormatInt(clk.Now().Add(keep).Unix(), 10); markerExp != want {
			t.Fatalf("the marker's expiresAt %q; want %s, the cancel's time + a day", markerExp, want)
		}
		first := m["runId"].(string)

		clk.Advance(keep + time.Second)
		resp, m = f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "", ""))
		if resp.StatusCode != http.StatusCreated || m["runId"] == first || m["status"] != "pending" {
			t.Fatalf("a retry a day later: %d %s; want a new run, pending", resp.StatusCode, resp.Body)
		}
		if got, err := probe.Get(ctx, first); err != nil || got.Status != runs.StatusCancelled {
			t.Fatalf("the cancelled retry: %+v %v; want it cancelled still", got, err)
		}
	})
}
