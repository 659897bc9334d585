// Package sweeper enforces retention on DynamoDB tables that have no TTL.
//
// MRSC global tables (multi-region strong consistency: the effects table
// under the template's EffectsConsistency=STRONG) support neither TTL nor
// transactions, and the idempotency table of a fenced-effects deployment
// has no TTL (its deletes would be made in every replica, not decided in
// the home region). Every idemkit table item that has a retention end carries it
// as the TTL attribute expiresAt (Unix seconds): the effects, fence and
// idempotency tables. A Sweeper deletes the items whose expiresAt has
// passed, which is what TTL does elsewhere; functions/sweeper runs it on a
// schedule.
//
// A sweep changes storage, not behaviour: every reader already treats an
// expired item as absent (DynamoDB TTL deletes lazily, up to ~48 h late, so
// expiry is part of every condition).
//
// The package is off the hot path and never uses a transaction or a batch
// write (a batch delete cannot be conditional).
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// API is the part of *dynamodb.Client a Sweeper uses: the only two actions
// its IAM role needs are dynamodb:Scan and dynamodb:DeleteItem on the swept
// table.
type API interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Defaults of the Sweeper's optional fields.
const (
	DefaultExpiresAttr = "expiresAt"
	DefaultPageSize    = 500
	DefaultConcurrency = 8
)

// Sweeper deletes expired items of one table. The zero value is unusable:
// API and Table are required. A Sweeper is safe for concurrent use, and any
// number of sweeps (in this or other processes) may run on one table at
// once: each item is deleted, and counted, by exactly one of them.
//
// Guarantees: an item is deleted only if its expiry attribute is at or
// before the sweep's now at the moment the delete is applied (each
// DeleteItem is conditional on it, so an item renewed between the scan and
// the delete survives, and an item another sweep already deleted is not
// counted twice); an item without the attribute is never deleted. On an
// MRSC table a delete refused because another Region is writing the item
// at that moment (ReplicatedWriteConflictException) is the same race: the
// item is left, not counted, and the sweep goes on.
//
// Cost: a sweep scans the whole table (a Scan reads, and is billed for,
// every item before the filter keeps the expired ones; only the key and
// expiry attributes are returned) and spends one conditional DeleteItem
// per expired item. Scans read eventually consistent pages (half the read
// units of consistent ones): an item a page does not show yet is swept by
// the next sweep, and every delete is conditional on the expiry whatever
// the page said.
type Sweeper struct {
	// API is the DynamoDB client. Required.
	API API
	// Table is the table name. Required.
	Table string
	// KeyAttrs are the primary-key attribute names. Default ["pk"]; the
	// effects table needs ["pk", "sk"].
	KeyAttrs []string
	// ExpiresAttr is the expiry attribute (Unix seconds, a number).
	// Default "expiresAt" (DefaultExpiresAttr).
	ExpiresAttr string
	// PageSize bounds the items read per Scan page. Default 500
	// (DefaultPageSize).
	PageSize int32
	// Concurrency bounds the DeleteItem calls in flight. Default 8
	// (DefaultConcurrency); 1 deletes one item at a time.
	Concurrency int
	// Segments divides the table into this many parallel-scan segments
	// (Scan's Segment and TotalSegments), swept one after another, the
	// first being the one the sweep's hour selects: (now in whole hours)
	// mod Segments. Hourly sweeps cut short (stop, an error) therefore
	// start one segment further on each time, and a table too large for
	// one sweep is still swept to its end within Segments of them, with no
	// cursor kept anywhere. Default 1: the whole table, in one scan from
	// its start.
	Segments int
}

// Result is what a sweep did.
type Result struct {
	// Scanned counts the items the Scan pages read (before the filter).
	Scanned int
	// Expired counts the expired items the scan returned.
	Expired int
	// Deleted counts the items this sweep deleted. Expired - Deleted were
	// renewed or deleted by someone else between the scan and the delete
	// (on an MRSC table, also: being written in another Region at that
	// moment), or not attempted because the sweep stopped.
	Deleted int
	// Complete reports that the scan reached the end of the table and every
	// expired item it returned was handled. False when the sweep stopped
	// early (stop, or an error).
	Complete bool
	// SegmentsSwept counts the segments the sweep scanned to their end,
	// the one it started with first. A sweep cut short with 0 did not
	// finish even the segment its hour selected: while every sweep that
	// starts there is cut short too, the segment's items past that point
	// are swept by no sweep (the others reach it only from its start).
	SegmentsSwept int
}

// Sweep deletes every item whose expiry is at or before now and returns how
// many it deleted. It stops at the first error; a later sweep resumes (the
// scan is stateless and the deleted items are gone).
func (w *Sweeper) Sweep(ctx context.Context, now time.Time) (int, error) {
	r, err := w.SweepUntil(ctx, now, nil)
	return r.Deleted, err
}

// SweepUntil is Sweep with a stop condition, checked before every Scan page
// and every DeleteItem: once stop reports true the sweep issues no further
// call, waits for the deletes in flight and returns with Complete false and
// a nil error. A nil stop never stops. Callers bound a run by a deadline
// this way (functions/sweeper stops before the Lambda deadline) while the
// calls in flight keep ctx, so they are not cut off mid-way.
//
// A cancelled ctx ends the sweep with ctx's error. Any other error (a Scan
// or DeleteItem failure after the client's retries, an item without a key
// attribute) stops the sweep and is returned with what was done so far.
func (w *Sweeper) SweepUntil(ctx context.Context, now time.Time, stop func() bool) (Result, error) {
	var r Result
	if w.API == nil || w.Table == "" {
		return r, errors.New("sweeper: Sweeper needs API and Table")
	}
	keys := w.KeyAttrs
	if len(keys) == 0 {
		keys = []string{"pk"}
	}
	exp := w.ExpiresAttr
	if exp == "" {
		exp = DefaultExpiresAttr
	}
	page := w.PageSize
	if page <= 0 {
		page = DefaultPageSize
	}
	conc := w.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	if stop == nil {
		stop = func() bool { return false }
	}
	expired := expression.Name(exp).LessThanEqual(expression.Value(now.Unix()))
	proj := expression.NamesList(expression.Name(exp))
	for _, k := range keys {
		proj = proj.AddNames(expression.Name(k))
	}
	scan, err := expression.NewBuilder().WithFilter(expired).WithProjection(proj).Build()
	if err != nil {
		return r, fmt.Errorf("sweeper: expression: %w", err)
	}
	del, err := expression.NewBuilder().WithCondition(expired).Build()
	if err != nil {
		return r, fmt.Errorf("sweeper: expression: %w", err)
	}

	d := &deleter{w: w, cond: del, sem: make(chan struct{}, conc)}
	segs := max(w.Segments, 1)
	first := int(now.Unix()/3600) % segs
	for i := range segs {
		done, err := w.sweepSegment(ctx, d, &r, (first+i)%segs, segs, page, keys, scan, stop)
		if err != nil || !done {
			return d.finish(&r, err)
		}
		r.SegmentsSwept++
	}
	res, err := d.finish(&r, nil)
	res.Complete = err == nil
	return res, err
}

// sweepSegment scans segment seg of segs (the whole table when segs is 1)
// and deletes its expired items through d; done is false when the sweep
// stopped (stop, a cancelled ctx: err, a failed delete) before the
// segment's end.
func (w *Sweeper) sweepSegment(ctx context.Context, d *deleter, r *Result, seg, segs int, page int32, keys []string, scan expression.Expression, stop func() bool) (done bool, err error) {
	var start map[string]types.AttributeValue
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if stop() {
			return false, nil
		}
		in := &dynamodb.ScanInput{
			TableName: aws.String(w.Table), Limit: aws.Int32(page), ExclusiveStartKey: start,
			FilterExpression:          scan.Filter(),
			ProjectionExpression:      scan.Projection(),
			ExpressionAttributeNames:  scan.Names(),
			ExpressionAttributeValues: scan.Values(),
		}
		if segs > 1 {
			in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(segs))
		}
		out, err := w.API.Scan(ctx, in)
		if err != nil {
			return false, fmt.Errorf("sweeper: Scan %s: %w", w.Table, err)
		}
		r.Scanned += int(out.ScannedCount)
		r.Expired += len(out.Items)
		for _, it := range out.Items {
			key := make(map[string]types.AttributeValue, len(keys))
			for _, k := range keys {
				v, ok := it[k]
				if !ok {
					return false, fmt.Errorf("sweeper: %s: item without key attribute %q", w.Table, k)
				}
				key[k] = v
			}
			if err := ctx.Err(); err != nil {
				return false, err
			}
			if d.failed() || stop() {
				return false, nil
			}
			d.delete(ctx, key)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return true, nil
		}
		start = out.LastEvaluatedKey
	}
}

// deleter runs the conditional deletes of one sweep, at most cap(sem) at a
// time, and keeps the first error.
type deleter struct {
	w    *Sweeper
	cond expression.Expression
	sem  chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	deleted int
	err     error
}

func (d *deleter) delete(ctx context.Context, key map[string]types.AttributeValue) {
	d.sem <- struct{}{}
	d.wg.Add(1)
	go func() {
		defer func() { <-d.sem; d.wg.Done() }()
		_, err := d.w.API.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(d.w.Table), Key: key,
			ConditionExpression:       d.cond.Condition(),
			ExpressionAttributeNames:  d.cond.Names(),
			ExpressionAttributeValues: d.cond.Values(),
		})
		var ccf *types.ConditionalCheckFailedException
		var rwc *types.ReplicatedWriteConflictException
		d.mu.Lock()
		defer d.mu.Unlock()
		switch {
		case err == nil:
			d.deleted++
		case errors.As(err, &ccf):
			// Renewed, or deleted by another sweep, since the scan: keep.
		case errors.As(err, &rwc):
			// An MRSC table refuses a write to an item a request in
			// another Region is modifying at that moment: that
			// Region's renewal or reclaim of it, or its sweeper's
			// delete. The race the condition is for: that write
			// decides the item, and a later sweep deletes it if it is
			// still expired. The SDK does not retry this error; it was
			// taken for a failure and stopped the sweep (RED_TEAM 436).
		case d.err == nil:
			d.err = fmt.Errorf("sweeper: DeleteItem %s: %w", d.w.Table, err)
		}
	}()
}

func (d *deleter) failed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err != nil
}

// finish waits for the deletes in flight and returns the result with the
// first error (a delete's error first, else err).
func (d *deleter) finish(r *Result, err error) (Result, error) {
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	r.Deleted = d.deleted
	if d.err != nil {
		err = d.err
	}
	return *r, err
}
