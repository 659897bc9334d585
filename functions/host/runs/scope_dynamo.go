package runs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
)

// A scope's RunsTable item: pk scopeKey(tenant, scopeId), tenant, holder
// (the runId holding it) and heldSince (Unix ms: the holder's createdAt).
// The scopeId itself is not stored.
const (
	scopeAttrHolder = "holder"
	scopeAttrSince  = "heldSince"
	// runAttrTakenOver marks a tombstone: an item written at the runId of
	// a scope holder that was never written, when another create took the
	// scope over from it (on every store). It fences the
	// interrupted create: its conditional Put finds the pk taken. A
	// tombstone is not a run (RunFromItem, Get).
	runAttrTakenOver = "scopeTakenOver"
)

// fencedItem reports whether it, the item at a run id, fences that id
// against a run that is no retry: a takeover's tombstone, or a cancel's
// marker (cancelUnwritten; only a retry's Create writes its run over
// one, cancelled), so a scope holder's run is never written there.
func fencedItem(it map[string]types.AttributeValue) bool {
	_, tomb := it[runAttrTakenOver]
	_, cancelled := it[runAttrCancelledUnwritten]
	return tomb || cancelled
}

// scopeAcquireTries bounds CreateScoped's compare-and-set loop: each lost
// race re-reads the scope, and a create that loses this many in a row is
// answered as refused (the scope is contended by live creates).
const scopeAcquireTries = 4

// CreateScoped implements RunStore. It takes the scope for r with one
// conditional PutItem of the scope's item (free, or already r's), then
// creates r as Create does. So an enforced create of a free scope costs
// one round trip and one write unit more than Create, on every store. A
// scope held by another run costs a read of that run; if it has ended, a
// PutItem conditional on the holder still being that run takes it over. A
// holder that was never written (its create was interrupted) is taken
// over only once its hold is ScopeHoldGrace old, and fenced: a tombstone
// is first written at the holder's runId, so the interrupted create's
// conditional Put (alone or in the Layer-1 completion transaction) can
// never land. A create whose run Put finds its tombstone is refused as
// *ScopeHeldError. A create whose run write fails after its scope write
// landed (outside a Layer-1 claim, whose retry reuses the run id) fences
// its own run id the same way, and a holder found fenced is taken over at
// once, so a failed create frees its scope without waiting out the grace.
//
// The run's Put carries no check that r still holds the scope: a
// takeover from r happens only once r's run id holds an item (r's run,
// which then has ended, or a tombstone), and the scope's item and the
// tombstones are never deleted, so a Put conditional on its id being free
// cannot land after r lost the scope. (Deleting a scope's item or a
// tombstone by hand while a create of that scope is under way voids this.)
func (d *DynamoRuns) CreateScoped(ctx context.Context, r Run, scopeID string) error {
	if err := checkScoped(r, scopeID); err != nil {
		return err
	}
	key := scopeKey(r.Tenant, scopeID)
	if c, ok := idem.FromContext(ctx); ok && (c.Attempt > 1 || c.Reclaimed) {
		// A re-execution of a Layer-1 record reuses its run id
		// (ClaimRunID). If an earlier execution wrote that run, the run
		// is the answer (ErrRunExists), not the scope's current holder.
		// A takeover may instead have fenced that id: that run
		// can never be written, so it must not take the scope (it would
		// hold it, unwritable, for ScopeHoldGrace). Refused: the record is
		// forgotten and the key's next request names a new run.
		it, err := d.getItem(ctx, r.ID)
		if err != nil {
			return err
		}
		if _, ok := RunFromItem(it); ok {
			// An earlier execution wrote the run (its completion was
			// lost): it is this record's run whoever holds the scope
			// now (the run may have ended and another taken the scope
			// over), so the scope is not looked at.
			return ErrRunExists
		}
		if fencedItem(it) {
			holder, _, err := d.scopeHolder(ctx, key)
			if err != nil {
				return err
			}
			return &ScopeHeldError{Holder: holder}
		}
	}
	if err := d.acquireScope(ctx, key, r); err != nil {
		return err
	}
	err := d.createIn(ctx, r, key)
	if err != nil && !errors.Is(err, ErrRunExists) && !errors.Is(err, ErrScopeHeld) {
		// The run's write failed after the scope's landed: give the scope
		// up rather than hold it for ScopeHoldGrace. The tombstone at r's
		// id frees it (acquireScope takes a fenced holder's scope over at
		// once) and keeps r's run from landing after; where r's run did
		// land after all (a lost answer), the tombstone fails and the
		// scope stays r's. Best effort: if this write fails too, the
		// scope is freed after the grace. Not under a Layer-1 claim that
		// fixes the run id (ClaimRunID): the key's retry re-executes under
		// the same id, finds the scope its own and creates its run.
		if c, ok := idem.FromContext(ctx); !ok || c.OriginalRequestID == "" {
			_, _ = d.tombstone(context.WithoutCancel(ctx), r.ID)
		}
		return err
	}
	var found *RunExistsError
	if errors.Is(err, ErrRunExists) && !errors.As(err, &found) {
		// Either a retry of this create (the run is there) or the scope
		// was taken over from r before r was written (a tombstone); a
		// run the refused write returned is no tombstone.
		it, gerr := d.getItem(ctx, r.ID)
		if gerr != nil {
			return gerr
		}
		if fencedItem(it) {
			holder, _, _ := d.scopeHolder(ctx, key)
			return &ScopeHeldError{Holder: holder}
		}
	}
	return err
}

// acquireScope makes r the holder of the scope key, or returns a
// *ScopeHeldError.
func (d *DynamoRuns) acquireScope(ctx context.Context, key string, r Run) error {
	free := expression.AttributeNotExists(expression.Name(runAttrPK)).Or(expression.Name(scopeAttrHolder).Equal(expression.Value(r.ID)))
	old, taken, err := d.putScope(ctx, key, r, free)
	for try := 1; ; try++ {
		if err != nil || !taken {
			return err
		}
		holder, since := scopeFromItem(old)
		if holder == "" {
			// The failed condition returned no item: read it.
			if holder, since, err = d.scopeHolder(ctx, key); err != nil {
				return err
			}
		}
		if try >= scopeAcquireTries {
			return &ScopeHeldError{Holder: holder}
		}
		if holder == "" {
			old, taken, err = d.putScope(ctx, key, r, free)
			continue
		}
		hi, gerr := d.getItem(ctx, holder)
		hr, isRun := RunFromItem(hi)
		fencedHolder := fencedItem(hi)
		switch {
		case gerr != nil:
			return gerr
		case isRun && !hr.Status.Terminal():
			return &ScopeHeldError{Holder: holder}
		case fencedHolder:
			// The holder is fenced already (its create gave the scope up,
			// or an earlier takeover fenced it): take the scope over now.
		case !isRun:
			if r.CreatedAt.Before(since.Add(ScopeHoldGrace)) {
				return &ScopeHeldError{Holder: holder, Unwritten: true}
			}
			// Fence the holder first, on every store: once the tombstone
			// is at its runId its run's conditional Put (alone or in a
			// transaction) can never land, so it can take the scope over
			// below. Were the holder's run written between the read above
			// and the tombstone, the tombstone fails and the holder is
			// looked at again.
			fenced, ferr := d.tombstone(ctx, holder)
			if ferr != nil {
				return ferr
			}
			if !fenced {
				// The holder's run was written meanwhile: look again.
				old, taken, err = nil, true, nil
				continue
			}
		}
		// The holder has ended (or was never written and is fenced): take
		// the scope over from it, and only from it; or find it r's already
		// (the SDK's retry of this write after its answer was lost).
		old, taken, err = d.putScope(ctx, key, r, expression.Name(scopeAttrHolder).Equal(expression.Value(holder)).
			Or(expression.Name(scopeAttrHolder).Equal(expression.Value(r.ID))))
	}
}

// putScope writes the scope's item with r as holder under cond. taken is
// true when cond failed; old is then the item as it is (nil when the
// engine does not return it).
func (d *DynamoRuns) putScope(ctx context.Context, key string, r Run, cond expression.ConditionBuilder) (old map[string]types.AttributeValue, taken bool, err error) {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, false, err
	}
	_, err = d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.Table),
		Item: map[string]types.AttributeValue{runAttrPK: sAV(key), runAttrTenant: sAV(r.Tenant),
			scopeAttrHolder: sAV(r.ID), scopeAttrSince: nAV(r.CreatedAt.UnixMilli())},
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("host: take run scope: %w", err)
	}
	return nil, false, nil
}

// scopeFromItem reads a scope item's holder and heldSince ("" when m is
// not one).
func scopeFromItem(m map[string]types.AttributeValue) (string, time.Time) {
	h, _ := m[scopeAttrHolder].(*types.AttributeValueMemberS)
	if h == nil {
		return "", time.Time{}
	}
	var since time.Time
	if n, ok := m[scopeAttrSince].(*types.AttributeValueMemberN); ok {
		if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			since = time.UnixMilli(ms).UTC()
		}
	}
	return h.Value, since
}

// scopeHolder reads the scope's holder (a consistent GetItem; "" when the
// scope has no item).
func (d *DynamoRuns) scopeHolder(ctx context.Context, key string) (string, time.Time, error) {
	it, err := d.getItem(ctx, key)
	if err != nil {
		return "", time.Time{}, err
	}
	h, since := scopeFromItem(it)
	return h, since, nil
}

// getItem is a consistent GetItem of the item pk.
func (d *DynamoRuns) getItem(ctx context.Context, pk string) (map[string]types.AttributeValue, error) {
	out, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{runAttrPK: sAV(pk)},
	})
	if err != nil {
		return nil, fmt.Errorf("host: get item: %w", err)
	}
	return out.Item, nil
}

// tombstone writes the takeover tombstone at runId id if no item is there:
// fenced is false when the run exists after all.
func (d *DynamoRuns) tombstone(ctx context.Context, id string) (fenced bool, err error) {
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(runAttrPK))).Build()
	if err != nil {
		return false, err
	}
	_, err = d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(d.Table),
		Item:                map[string]types.AttributeValue{runAttrPK: sAV(id), runAttrTakenOver: sAV("true")},
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
	})
	if err := conditionalWrite(err, ErrRunExists, "fence run scope holder"); err != nil {
		if errors.Is(err, ErrRunExists) {
			// A lost answer's retry finds its own tombstone: still fenced.
			it, gerr := d.getItem(ctx, id)
			if gerr != nil {
				return false, gerr
			}
			return fencedItem(it), nil
		}
		return false, err
	}
	return true, nil
}
