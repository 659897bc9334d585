package runs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

func scopeTestRun(at time.Time) Run {
	return NewRun("acme", "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), at)
}

// TestScopeUnwrittenHolder: a create that took its scope and stopped
// before writing its run (a crash between the two writes) holds the scope
// only for ScopeHoldGrace; the create that then takes the scope over fences
// it, so its run can never be written after. Without transactions the
// fence is a tombstone at the holder's runId, which is not a run.
func TestScopeUnwrittenHolder(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		d := &DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		crashed := scopeTestRun(t0)
		key := scopeKey("acme", "s")
		if err := d.acquireScope(ctx, key, crashed); err != nil {
			t.Fatal(err)
		}
		var held *ScopeHeldError
		early := scopeTestRun(t0.Add(time.Minute))
		if err := d.CreateScoped(ctx, early, "s"); !errors.As(err, &held) || held.Holder != crashed.ID || !held.Unwritten {
			t.Fatalf("within the grace: %v, want held by the unwritten %s", err, crashed.ID)
		}
		late := scopeTestRun(t0.Add(ScopeHoldGrace + time.Second))
		if err := d.CreateScoped(ctx, late, "s"); err != nil {
			t.Fatalf("after the grace: %v", err)
		}
		// The interrupted create resumes: its run is never written.
		if err := d.CreateScoped(ctx, crashed, "s"); !errors.Is(err, ErrScopeHeld) {
			t.Fatalf("the fenced create resumed: %v, want ErrScopeHeld", err)
		}
		if err := d.Create(ctx, crashed); !errors.Is(err, ErrRunExists) {
			t.Fatalf("the fenced run's Put: %v, want refused", err)
		}
		if _, err := d.Get(ctx, crashed.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the tombstone reads as a run: %v", err)
		}
		if _, err := d.Get(ctx, late.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// TestScopeUnwrittenHolderTransactional: on a Transactional store the
// interrupted create's run write carries no check of the scope item; the
// takeover's tombstone at its runId is what refuses it, whether it resumes
// outside a Layer-1 claim (CreateScoped: ErrScopeHeld; its conditional
// PutItem: ErrRunExists) or its Put commits in the completion transaction
// (the Put create hands idem.Transact, cancelled on its condition; the
// api handler's path: apifn TestDedupCompletionAfterTakeover).
func TestScopeUnwrittenHolderTransactional(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Transactional: true}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		crashed := scopeTestRun(t0)
		key := scopeKey("acme", "s")
		if err := d.acquireScope(ctx, key, crashed); err != nil {
			t.Fatal(err)
		}
		late := scopeTestRun(t0.Add(ScopeHoldGrace + time.Second))
		if err := d.CreateScoped(ctx, late, "s"); err != nil {
			t.Fatalf("after the grace: %v", err)
		}
		cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(runAttrPK))).Build()
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
			TableName: aws.String(d.Table), Item: runItem(withFirstVersion(crashed)),
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()}}}})
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("the interrupted create's Put in a transaction: %v, want it cancelled", err)
		}
		if err := d.create(ctx, crashed); !errors.Is(err, ErrRunExists) {
			t.Fatalf("the interrupted create's run write: %v, want ErrRunExists (the tombstone)", err)
		}
		var held *ScopeHeldError
		if err := d.CreateScoped(ctx, crashed, "s"); !errors.As(err, &held) || held.Holder != late.ID {
			t.Fatalf("the interrupted create resumed: %v, want held by %s", err, late.ID)
		}
		if _, err := d.Get(ctx, crashed.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the fenced run was written: %v", err)
		}
	})
}

// TestScopeThrottled: a throttled scope write is retried by the SDK and
// the create succeeds once; a write that keeps failing leaves no run and
// no hold (the next create of the scope succeeds).
func TestScopeThrottled(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		d := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		r := scopeTestRun(t0)
		faults.FailNext("PutItem", 1, dynamotest.Throttle())
		if err := d.CreateScoped(ctx, r, "s"); err != nil {
			t.Fatalf("after one throttle: %v", err)
		}
		if _, err := d.Get(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		faults.FailNext("PutItem", 100, dynamotest.Throttle())
		other := scopeTestRun(t0)
		if err := d.CreateScoped(ctx, other, "t"); err == nil || errors.Is(err, ErrScopeHeld) {
			t.Fatalf("a scope write that keeps failing: %v, want the store's error", err)
		}
		faults.Clear()
		if _, err := d.Get(ctx, other.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("a failed create wrote its run: %v", err)
		}
		next := scopeTestRun(t0)
		if err := d.CreateScoped(ctx, next, "t"); err != nil {
			t.Fatalf("the scope after a failed create: %v", err)
		}
	})
}

// lateWriter is a runs client whose first consistent read of the item pk
// is followed, before its answer returns, by write: the slow holder's own
// run write landing between a takeover's read of the holder and its
// takeover write.
type lateWriter struct {
	*dynamodb.Client
	pk    string
	write func()
	once  sync.Once
}

func (c *lateWriter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.Client.GetItem(ctx, in, opts...)
	if k, _ := in.Key[runAttrPK].(*types.AttributeValueMemberS); k != nil && k.Value == c.pk {
		c.once.Do(c.write)
	}
	return out, err
}

// TestScopeTakeoverRacesSlowHolder: a holder that is slow, not dead. Its
// create took the scope, then stalled past ScopeHoldGrace; a takeover
// reads the holder's run (not there), and the holder's run write lands
// before the takeover's write. Exactly one of the two runs may be live
// afterwards, on every engine, with and without transactions.
func TestScopeTakeoverRacesSlowHolder(t *testing.T) {
	forEachWriteMode(t, func(t *testing.T, e *dynamotest.Emulator, transactional bool) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		table := e.CreateTable(t, "RunsTable")
		holder := &DynamoRuns{Client: c, Table: table, Transactional: transactional}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		slow := scopeTestRun(t0)
		key := scopeKey("acme", "s")
		if err := holder.acquireScope(ctx, key, slow); err != nil {
			t.Fatal(err)
		}
		var slowErr error
		lw := &lateWriter{Client: c, pk: slow.ID, write: func() {
			// The rest of the slow create's CreateScoped: its run
			// write.
			slowErr = holder.CreateScoped(ctx, slow, "s")
		}}
		taker := &DynamoRuns{Client: lw, Table: table, Transactional: transactional}
		late := scopeTestRun(t0.Add(ScopeHoldGrace + time.Second))
		lateErr := taker.CreateScoped(ctx, late, "s")
		if lateErr != nil && !errors.Is(lateErr, ErrScopeHeld) {
			t.Fatalf("the takeover: %v", lateErr)
		}
		if slowErr != nil && !errors.Is(slowErr, ErrScopeHeld) {
			t.Fatalf("the slow holder's write: %v", slowErr)
		}
		_, gs := holder.Get(ctx, slow.ID)
		_, gl := holder.Get(ctx, late.ID)
		if gs == nil && gl == nil {
			t.Fatalf("two live runs hold one scope: %s (slow holder, err %v) and %s (takeover, err %v)", slow.ID, slowErr, late.ID, lateErr)
		}
		if gs != nil && gl != nil {
			t.Fatalf("neither run was written: %v, %v", slowErr, lateErr)
		}
		if (gs == nil) != (slowErr == nil) || (gl == nil) != (lateErr == nil) {
			t.Fatalf("answers disagree with the table: slow %v/%v, late %v/%v", slowErr, gs, lateErr, gl)
		}
	})
}

// TestScopeItemsAreNotRuns: of everything enforced creates leave in
// RunsTable (runs, scope items, a takeover's tombstone), only the runs
// decode as runs (RunFromItem: what the executor's stream handling and
// `idemkit dev`'s stream poller read an INSERT's image with), and Get of
// a tombstone's id is ErrRunNotFound.
func TestScopeItemsAreNotRuns(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		crashed := scopeTestRun(t0)
		if err := d.acquireScope(ctx, scopeKey("acme", "s"), crashed); err != nil {
			t.Fatal(err)
		}
		late := scopeTestRun(t0.Add(ScopeHoldGrace + time.Second))
		if err := d.CreateScoped(ctx, late, "s"); err != nil {
			t.Fatal(err)
		}
		other := scopeTestRun(t0)
		if err := d.CreateScoped(ctx, other, "t"); err != nil {
			t.Fatal(err)
		}
		out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(d.Table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		decoded := map[string]bool{}
		for _, it := range out.Items {
			if r, ok := RunFromItem(it); ok {
				decoded[r.ID] = true
			}
		}
		if len(out.Items) != 5 || len(decoded) != 2 || !decoded[late.ID] || !decoded[other.ID] {
			t.Fatalf("%d items, decoded as runs %v; want 5 items (2 runs, 2 scopes, 1 tombstone), runs %s and %s", len(out.Items), decoded, late.ID, other.ID)
		}
		if _, err := d.Get(ctx, crashed.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("Get of a tombstone's id: %v", err)
		}
		if _, err := d.Transition(ctx, crashed.ID, []Status{StatusPending}, StatusCancelled, "", t0); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("cancel of a tombstone's id: %v", err)
		}
	})
}

// TestScopeTakeoverLostAnswer: the takeover write of an ended holder's
// scope applies and its answer is lost; the SDK's retry finds its
// condition false (the scope is already this create's). The create still
// succeeds, holding the scope, rather than refusing itself and leaving
// the scope held by a run never written for ScopeHoldGrace.
func TestScopeTakeoverLostAnswer(t *testing.T) {
	forEachWriteMode(t, func(t *testing.T, e *dynamotest.Emulator, transactional bool) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		d := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		h := scopeTestRun(t0)
		if err := d.CreateScoped(ctx, h, "s"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Transition(ctx, h.ID, []Status{StatusPending}, StatusCompleted, "", t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		// The refused scope write passes; the takeover write's answer
		// is lost.
		faults.PassNext("PutItem", 1)
		faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		next := scopeTestRun(t0.Add(2 * time.Second))
		if err := d.CreateScoped(ctx, next, "s"); err != nil {
			t.Fatalf("a takeover whose answer was lost: %v", err)
		}
		if faults.Pending() != 0 {
			t.Fatal("the lost answer was never armed")
		}
		if _, err := d.Get(ctx, next.ID); err != nil {
			t.Fatal(err)
		}
		var held *ScopeHeldError
		if err := d.CreateScoped(ctx, scopeTestRun(t0.Add(3*time.Second)), "s"); !errors.As(err, &held) || held.Holder != next.ID {
			t.Fatalf("a later create: %v, want held by %s", err, next.ID)
		}
	})
}

// TestScopeRunWriteFails: the scope's write lands and the run's write
// fails (the store's errors outlast the SDK's 3 attempts), on a
// conditional and a Transactional store. The create
// fails with the store's error and gives the scope up (it fences its own
// run id), so the next create of the scope succeeds at once instead of
// waiting out ScopeHoldGrace; the failed create's run can never be
// written after.
func TestScopeRunWriteFails(t *testing.T) {
	forEachWriteMode(t, func(t *testing.T, e *dynamotest.Emulator, transactional bool) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		d := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		failed := scopeTestRun(t0)
		// The run's write is a conditional PutItem on both stores
		// outside a Layer-1 claim (it carries no check of the scope
		// item, so it needs no transaction).
		faults.PassNext("PutItem", 1)
		faults.FailNext("PutItem", 3, dynamotest.Throttle())
		if err := d.CreateScoped(ctx, failed, "s"); err == nil || errors.Is(err, ErrScopeHeld) {
			t.Fatalf("a create whose run write failed: %v, want the store's error", err)
		}
		if n := faults.Pending(); n != 0 {
			t.Fatalf("%d injected faults never fired", n)
		}
		next := scopeTestRun(t0.Add(time.Second))
		if err := d.CreateScoped(ctx, next, "s"); err != nil {
			t.Fatalf("the next create of the scope, within the grace: %v", err)
		}
		if err := d.CreateScoped(ctx, failed, "s"); !errors.Is(err, ErrScopeHeld) {
			t.Fatalf("the failed create again: %v, want ErrScopeHeld", err)
		}
		if _, err := d.Get(ctx, failed.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the failed create's run: %v", err)
		}
	})
}
