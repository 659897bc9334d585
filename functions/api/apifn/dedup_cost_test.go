package apifn

import (
	"context"
	"maps"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDedupEnforceCost pins what `OpenWOP-Dedup: enforce` adds to a keyed
// createRun of a free scope, in DynamoDB calls and in write units computed
// from item sizes under both readings of AWS's rule (dynamotest.Meter):
// the scope's conditional PutItem, one call and one write unit, and
// nothing else, on every engine, whether the run is written by its own
// conditional PutItem or in the Layer-1 completion transaction (where a
// check of the scope item would cost two write units more: the takeover's
// tombstone already keeps a create whose scope was taken over from
// writing its run, TestDedupCompletionAfterTakeover).
func TestDedupEnforceCost(t *testing.T) {
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			m := dynamotest.NewMeter(e.Client(), "pk")
			c := e.Client(dynamotest.FastRetries, m.Middleware())
			store, st := dynamoStores(t, e, c, transactional)
			f := hostOf(t, store, idem.Config{Store: st}, nil)
			m.Take()
			if r, _ := f.do(t, ev("POST", "/runs", "acme", dedupKey("cost", 0), `{"workflowId":"conformance-noop","scopeId":"cost"}`)); r.StatusCode != http.StatusCreated {
				t.Fatal(r.Body)
			}
			plain := m.Take()
			if r, _ := f.do(t, enforced("acme", dedupKey("cost", 1), "cost")); r.StatusCode != http.StatusCreated {
				t.Fatal(r.Body)
			}
			scoped := m.Take()
			t.Logf("keyed create: %v, %d/%d WCU, %d RCU; enforced: %v, %d/%d WCU, %d RCU (existing/larger)",
				plain.Calls, plain.WriteExisting, plain.WriteLarger, plain.Read, scoped.Calls, scoped.WriteExisting, scoped.WriteLarger, scoped.Read)
			want := maps.Clone(plain.Calls)
			want["PutItem"]++
			if !maps.Equal(scoped.Calls, want) {
				t.Errorf("an enforced create's calls %v, want a keyed create's %v and one PutItem", scoped.Calls, plain.Calls)
			}
			if scoped.WriteExisting != plain.WriteExisting+1 || scoped.WriteLarger != plain.WriteLarger+1 || scoped.Read != plain.Read {
				t.Errorf("an enforced create: %d/%d WCU, %d RCU; want a keyed create's %d/%d WCU + 1 (the scope's item) and its %d RCU",
					scoped.WriteExisting, scoped.WriteLarger, scoped.Read, plain.WriteExisting, plain.WriteLarger, plain.Read)
			}
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}

// beforeRunWrite is a client option that calls fn, once, just before the
// first write of a run's item (not a scope item nor a tombstone) to table
// is sent: the run's PutItem, or the completion transaction holding its
// Put. fn's own calls through the client pass.
func beforeRunWrite(table string, fn func()) func(*dynamodb.Options) {
	var fired atomic.Bool
	return onRunWrite(table, func() {
		if fired.CompareAndSwap(false, true) {
			fn()
		}
	})
}

// onRunWrite is a client option that calls fn just before each write of
// a run's item to table is sent (beforeRunWrite).
func onRunWrite(table string, fn func()) func(*dynamodb.Options) {
	isRun := func(tb *string, item map[string]types.AttributeValue) bool {
		if tb == nil || *tb != table {
			return false
		}
		_, isRun := runs.RunFromItem(item)
		return isRun
	}
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("apifn.beforeRunWrite",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					run := false
					switch p := in.Parameters.(type) {
					case *dynamodb.PutItemInput:
						run = isRun(p.TableName, p.Item)
					case *dynamodb.TransactWriteItemsInput:
						for _, it := range p.TransactItems {
							run = run || (it.Put != nil && isRun(it.Put.TableName, it.Put.Item))
						}
					}
					if run {
						fn()
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}

// TestDedupCompletionAfterTakeover: a keyed enforced create took its scope
// and was slow to write its run, past ScopeHoldGrace; meanwhile another
// key took the scope over, fencing the slow create's run id with a
// tombstone, and created its own run. The slow create's run write (its
// conditional PutItem, or its Put in the Layer-1 completion transaction,
// which carries no check of the scope item) then fails on the tombstone:
// it is answered 409 run_already_active with Retry-After, as a create
// refused before its write is (never a 500), and its run is never
// written, so one live run holds the scope. Its key's retry is refused
// 409 while the taker lives, and the taker's key replays its 201. On every
// engine.
func TestDedupCompletionAfterTakeover(t *testing.T) {
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			ctx := context.Background()
			runsTable := e.CreateTable(t, "RunsTable")
			clk := &skewedClock{}
			// Each request has its own API Gateway request id, as a
			// client's retries do.
			var q requestIDs
			enforced := q.enforced
			var f *fixture
			var takerAnswer events.APIGatewayV2HTTPResponse
			var takerBody map[string]any
			c := e.Client(dynamotest.FastRetries, beforeRunWrite(runsTable, func() {
				// Past the grace (and the slow claim's lease), another key
				// takes the scope over.
				clk.off.Store(int64(runs.ScopeHoldGrace + time.Minute))
				takerAnswer, takerBody = f.do(t, enforced("acme", dedupKey("slow", 1), "order-29"))
			}))
			store := &runs.DynamoRuns{Client: c, Table: runsTable, Transactional: transactional}
			st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
			if err != nil {
				t.Fatal(err)
			}
			f = hostOf(t, store, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
			slow := dedupKey("slow", 0)
			r, m := f.do(t, enforced("acme", slow, "order-29"))
			if takerAnswer.StatusCode != http.StatusCreated {
				t.Fatalf("the takeover: %d %s", takerAnswer.StatusCode, takerAnswer.Body)
			}
			taker, _ := takerBody["runId"].(string)
			if r.StatusCode == http.StatusCreated {
				t.Fatalf("the slow create answered 201 (%s) after its scope was taken over by %s", r.Body, taker)
			}
			// Answered as a create refused before its write: 409
			// run_already_active with Retry-After, never a 500.
			wantHeld(t, "the slow create", r)
			if id, _ := m["runId"].(string); id != "" {
				if _, err := store.Get(ctx, id); err == nil {
					t.Fatalf("the slow create's run %s was written beside the taker's %s", id, taker)
				}
			}
			live, err := store.Get(ctx, taker)
			if err != nil || live.Status.Terminal() {
				t.Fatalf("the taker's run: %+v, %v", live, err)
			}
			// The slow key's retry: refused while the taker lives; the
			// taker's key replays its 201.
			r, _ = f.do(t, enforced("acme", slow, "order-29"))
			wantHeld(t, "the slow key's retry", r)
			if r, m := f.do(t, enforced("acme", dedupKey("slow", 1), "order-29")); r.StatusCode != http.StatusCreated || m["runId"] != taker {
				t.Fatalf("the taker's key again: %d %s, want its 201 for %s", r.StatusCode, r.Body, taker)
			}
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}

// TestDedupRetryFencedBeforeCompletion: a keyed enforced create took its
// scope and its run's write failed, so the scope names a run that does not
// exist. Past the hold's grace, the key's retry re-executes under the same
// run id: it finds the scope its own and passes every check; then, before
// its run's write is sent, another key takes the scope over (the retry
// refreshed the hold, so past the grace again), fencing the retry's run id
// with a tombstone, and creates its run. The retry's run write (its
// conditional PutItem, or its Put in the Layer-1 completion transaction,
// which the tombstone cancels) fails: it is answered 409
// run_already_active with Retry-After, at once, never a 500, and its run is
// never written. The key's next request is 409 too, the taker's key
// replays its 201, and once the taker ended the key creates. On every
// engine, with the run committed by its own conditional write and (where
// the engine has transactions) in the completion transaction.
func TestDedupRetryFencedBeforeCompletion(t *testing.T) {
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			ctx := context.Background()
			runsTable := e.CreateTable(t, "RunsTable")
			clk := &skewedClock{}
			var q requestIDs
			enforced := func(key string) events.APIGatewayV2HTTPRequest { return q.enforced("acme", key, "order-41") }
			var f *fixture
			var armed atomic.Bool
			var takerAnswer events.APIGatewayV2HTTPResponse
			var takerBody map[string]any
			taker := dedupKey("fenced", 1)
			faults := dynamotest.NewFaults()
			c := e.Client(dynamotest.FastRetries, faults.Middleware(), onRunWrite(runsTable, func() {
				if armed.CompareAndSwap(true, false) {
					clk.off.Store(int64(2 * (runs.ScopeHoldGrace + time.Minute)))
					takerAnswer, takerBody = f.do(t, enforced(taker))
				}
			}))
			store := &runs.DynamoRuns{Client: c, Table: runsTable, Transactional: transactional}
			st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
			if err != nil {
				t.Fatal(err)
			}
			f = hostOf(t, store, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
			first := dedupKey("fenced", 0)
			// The first execution: the claim and the scope's write land,
			// the run's write does not.
			interruptCreate(t, f, faults, transactional, enforced(first))

			// The retry, past the grace; the takeover comes just before its
			// run's write.
			clk.off.Store(int64(runs.ScopeHoldGrace + time.Minute))
			armed.Store(true)
			r, m := f.do(t, enforced(first))
			if armed.Load() {
				t.Fatal("the retry wrote no run")
			}
			if takerAnswer.StatusCode != http.StatusCreated {
				t.Fatalf("the takeover: %d %s", takerAnswer.StatusCode, takerAnswer.Body)
			}
			won, _ := takerBody["runId"].(string)
			wantHeld(t, "the retry fenced before its run's write", r)
			if id, _ := m["runId"].(string); id != "" {
				t.Fatalf("the refused retry named run %s", id)
			}
			live, err := store.Get(ctx, won)
			if err != nil || live.Status.Terminal() {
				t.Fatalf("the taker's run %s: %+v, %v", won, live, err)
			}
			// The retry's run (the record's fixed run id) was never
			// written: the only run of the tenant is the taker's.
			out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: &runsTable, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, it := range out.Items {
				if r, ok := runs.RunFromItem(it); ok {
					ids = append(ids, r.ID)
				}
			}
			if len(ids) != 1 || ids[0] != won {
				t.Fatalf("the runs written: %v, want only the taker's %s", ids, won)
			}
			// The key's next request: refused (its record was forgotten);
			// the taker's key replays its 201.
			r, _ = f.do(t, enforced(first))
			wantHeld(t, "the fenced key again", r)
			if r, m := f.do(t, enforced(taker)); r.StatusCode != http.StatusCreated || m["runId"] != won {
				t.Fatalf("the taker's key again: %d %s, want its 201 for %s", r.StatusCode, r.Body, won)
			}
			// Once the taker ended, the fenced key creates its run.
			if _, err := store.Transition(ctx, won, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", clk.Now()); err != nil {
				t.Fatal(err)
			}
			r, m = f.do(t, enforced(first))
			if r.StatusCode != http.StatusCreated {
				t.Fatalf("the fenced key after the taker ended: %d %s", r.StatusCode, r.Body)
			}
			if id, _ := m["runId"].(string); id == "" || id == won {
				t.Fatalf("the fenced key's new run: %q", id)
			} else if _, err := store.Get(ctx, id); err != nil {
				t.Fatalf("the run its 201 named: %v", err)
			}
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}
