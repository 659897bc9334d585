package runs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestScopeParallelTakeoversOfAnUnwrittenHolder: a scope's item names a
// run that was never written (its create stopped between the scope's
// write and the run's) and many enforced creates of the scope, each its
// own run, try to take it over at once once the hold's grace is over.
// Exactly one run is created and holds the scope; every other create is
// refused as *ScopeHeldError (409 run_already_active at the API) naming
// that run, and wrote no run; the interrupted create can no longer write
// its run; once the winner ends, the scope is taken over again. On
// DynamoDB (every engine) a second round also lets the interrupted create
// resume its run write among the racers (a conditional PutItem, and where
// the engine has transactions, the Put in a completion transaction):
// whichever lands first, one live run holds the scope. In memory the scope and the run are written under one lock,
// so the unwritten holder is planted directly.
func TestScopeParallelTakeoversOfAnUnwrittenHolder(t *testing.T) {
	const racers = 16
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	past := t0.Add(ScopeHoldGrace + time.Second)

	t.Run("memory", func(t *testing.T) {
		ctx := context.Background()
		m := NewMemRuns()
		crashed := scopeTestRun(t0)
		m.mu.Lock()
		m.scopes = map[string]memScope{scopeKey("acme", "s"): {holder: crashed.ID}}
		m.mu.Unlock()
		takeovers(t, ctx, m, crashed, racers, past, nil)
	})

	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		modes := []bool{false}
		if e.Caps.Transactions {
			modes = append(modes, true)
		}
		for _, transactional := range modes {
			for _, resume := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s", map[bool]string{false: "conditional", true: "transactional"}[transactional],
					map[bool]string{false: "holder dead", true: "holder resumes"}[resume])
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					c := e.Client(dynamotest.FastRetries)
					d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}
					crashed := scopeTestRun(t0)
					if err := d.acquireScope(ctx, scopeKey("acme", "s"), crashed); err != nil {
						t.Fatal(err)
					}
					var resumeRun func() error
					switch {
					case resume && transactional:
						// The rest of the interrupted create: its run's
						// Put committed in the Layer-1 completion
						// transaction (no check of the scope item).
						resumeRun = func() error { return transactRun(ctx, c, d, crashed) }
					case resume:
						// The rest of the interrupted create: its run's
						// conditional PutItem.
						resumeRun = func() error { return d.create(ctx, crashed) }
					}
					takeovers(t, ctx, d, crashed, racers, past, resumeRun)
				})
			}
		}
	})
}

// takeovers races n enforced creates of scope "s" at at, whose holder is
// the never-written crashed, with resume (when set: the crashed create's
// run write) among them, and checks that exactly one live run holds the
// scope and every answer agrees with the store.
func takeovers(t *testing.T, ctx context.Context, st RunStore, crashed Run, n int, at time.Time, resume func() error) {
	t.Helper()
	rs := make([]Run, n)
	for i := range rs {
		rs[i] = scopeTestRun(at)
	}
	errs := make([]error, n)
	var resumeErr error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = st.CreateScoped(ctx, rs[i], "s")
		}()
	}
	if resume != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resumeErr = resume()
		}()
	}
	close(start)
	wg.Wait()

	// The one live run of the scope: the interrupted create's (when its
	// write landed first) or one racer's.
	holder := ""
	_, cerr := st.Get(ctx, crashed.ID)
	switch {
	case cerr == nil && resume == nil:
		t.Fatalf("the never-written holder %s reads as a run", crashed.ID)
	case cerr == nil:
		if resumeErr != nil {
			t.Fatalf("the interrupted create's run was written, but its write answered %v", resumeErr)
		}
		holder = crashed.ID
	case !errors.Is(cerr, ErrRunNotFound):
		t.Fatal(cerr)
	case resume != nil && !errors.Is(resumeErr, ErrRunExists):
		t.Fatalf("the interrupted create's run write: %v, want refused (fenced)", resumeErr)
	}
	for i, err := range errs {
		_, gerr := st.Get(ctx, rs[i].ID)
		if gerr != nil && !errors.Is(gerr, ErrRunNotFound) {
			t.Fatal(gerr)
		}
		written := gerr == nil
		switch {
		case err == nil && !written:
			t.Fatalf("racer %d answered created, but its run %s is not there", i, rs[i].ID)
		case err == nil && holder != "":
			t.Fatalf("two runs hold one scope: %s and %s", holder, rs[i].ID)
		case err == nil:
			holder = rs[i].ID
		case written:
			t.Fatalf("racer %d was refused (%v), but its run %s was written", i, err, rs[i].ID)
		case !errors.Is(err, ErrScopeHeld):
			t.Fatalf("racer %d: %v, want nil or ErrScopeHeld", i, err)
		}
	}
	if holder == "" {
		t.Fatal("no run holds the scope: every create was refused and the holder was never written")
	}
	for i, err := range errs {
		var held *ScopeHeldError
		if err != nil && (!errors.As(err, &held) || held.Holder != holder) {
			t.Fatalf("racer %d refused as %v (holder %+v), want held by %s", i, err, held, holder)
		}
	}

	// The interrupted create resumes after the race: refused, no run.
	if holder != crashed.ID {
		if err := st.CreateScoped(ctx, crashed, "s"); !errors.Is(err, ErrScopeHeld) {
			t.Fatalf("the interrupted create resumed: %v, want ErrScopeHeld", err)
		}
		if _, err := st.Get(ctx, crashed.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the interrupted create's run: %v, want not found", err)
		}
	}
	// A later create is refused while the holder lives, and takes the
	// scope once it ended: nothing is stuck.
	later := scopeTestRun(at.Add(time.Second))
	var held *ScopeHeldError
	if err := st.CreateScoped(ctx, later, "s"); !errors.As(err, &held) || held.Holder != holder {
		t.Fatalf("a create while %s lives: %v, want held by it", holder, err)
	}
	if _, err := st.Transition(ctx, holder, []Status{StatusPending}, StatusCancelled, "", at.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	next := scopeTestRun(at.Add(3 * time.Second))
	if err := st.CreateScoped(ctx, next, "s"); err != nil {
		t.Fatalf("a create after %s ended: %v", holder, err)
	}
}

// transactRun commits r's run Put alone in a TransactWriteItems, as the
// Layer-1 completion transaction carries it: ErrRunExists when its
// condition fails.
func transactRun(ctx context.Context, c *dynamodb.Client, d *DynamoRuns, r Run) error {
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(runAttrPK))).Build()
	if err != nil {
		return err
	}
	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(d.Table), Item: runItem(withFirstVersion(r)),
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()}}}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		return ErrRunExists
	}
	return err
}
