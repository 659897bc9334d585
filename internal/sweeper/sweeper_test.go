package sweeper_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/sweeper"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

var now = time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// keysOf returns the key attributes of a template.yaml table.
func keysOf(logicalID string) []string {
	if logicalID == "EffectsTable" {
		return []string{"pk", "sk"}
	}
	return []string{"pk"}
}

func key(logicalID string, i int) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(i)}}
	if logicalID == "EffectsTable" {
		k["sk"] = &types.AttributeValueMemberS{Value: "record"}
	}
	return k
}

func put(t *testing.T, c *dynamodb.Client, table, logicalID string, i int, exp *time.Time) {
	t.Helper()
	item := key(logicalID, i)
	item["payload"] = &types.AttributeValueMemberS{Value: "x"}
	if exp != nil {
		item["expiresAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)}
	}
	if _, err := c.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// seed writes n items: i%3==0 live (expires in an hour), i%7==0 without
// expiresAt, i%11==0 expiring exactly at now (expired: "at or before"),
// the rest expired an hour ago. It returns the keys of the expired ones.
func seed(t *testing.T, c *dynamodb.Client, table, logicalID string, n int) map[string]bool {
	t.Helper()
	expired := map[string]bool{}
	for i := range n {
		exp := now.Add(-time.Hour)
		switch {
		case i%3 == 0:
			exp = now.Add(time.Hour)
		case i%7 == 0:
			put(t, c, table, logicalID, i, nil)
			continue
		case i%11 == 0:
			exp = now
		}
		put(t, c, table, logicalID, i, &exp)
		if !exp.After(now) {
			expired["k"+strconv.Itoa(i)] = true
		}
	}
	return expired
}

// remaining returns the pk of every item left in the table.
func remaining(t *testing.T, c *dynamodb.Client, table string) map[string]bool {
	t.Helper()
	left := map[string]bool{}
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			left[it["pk"].(*types.AttributeValueMemberS).Value] = true
		}
	}
	return left
}

// checkOnlyExpiredGone fails unless exactly the expired items of a seeded
// table of n items are gone.
func checkOnlyExpiredGone(t *testing.T, c *dynamodb.Client, table string, n int, expired map[string]bool) {
	t.Helper()
	left := remaining(t, c, table)
	for i := range n {
		k := "k" + strconv.Itoa(i)
		if expired[k] == left[k] {
			t.Fatalf("%s: item %s expired=%v, still there=%v", table, k, expired[k], left[k])
		}
	}
}

// A sweep deletes exactly the expired items (expiry at or before now), on
// the three tables that carry expiresAt (the effects table's composite key
// too), over many pages; items without the attribute and live items stay.
// A second sweep finds nothing.
func TestSweepDeletesExpiredOnly(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		for _, id := range []string{"EffectsTable", "FenceTable", "IdempotencyTable"} {
			table := e.CreateTable(t, id)
			const n = 40
			expired := seed(t, c, table, id, n)
			w := &sweeper.Sweeper{API: c, Table: table, KeyAttrs: keysOf(id), PageSize: 7, Concurrency: 3}
			r, err := w.SweepUntil(ctx(t), now, nil)
			if err != nil || !r.Complete || r.Deleted != len(expired) || r.Expired != len(expired) || r.Scanned != n {
				t.Fatalf("%s: %+v %v, want %d deleted of %d scanned, complete", id, r, err, len(expired), n)
			}
			checkOnlyExpiredGone(t, c, table, n, expired)
			if d, err := w.Sweep(ctx(t), now); d != 0 || err != nil {
				t.Fatalf("%s: second sweep deleted %d (%v)", id, d, err)
			}
		}
	})
}

// Sweeps racing on one table (overlapping scheduled runs, or two regions of
// an MRSC table) delete every expired item once: the counts add up to the
// expired items exactly, because a delete is conditional on the item still
// being expired (an item already gone fails the condition).
func TestConcurrentSweepsCountEachItemOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		table := e.CreateTable(t, "EffectsTable")
		const n = 60
		expired := seed(t, c, table, "EffectsTable", n)
		var total atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				w := &sweeper.Sweeper{API: c, Table: table, KeyAttrs: []string{"pk", "sk"}, PageSize: 5}
				d, err := w.Sweep(ctx(t), now)
				total.Add(int64(d))
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if total.Load() != int64(len(expired)) {
			t.Fatalf("sweeps deleted %d in total, want %d", total.Load(), len(expired))
		}
		checkOnlyExpiredGone(t, c, table, n, expired)
	})
}

// renewing renews chosen items (a writer extending their retention, e.g. a
// reclaim) right before the sweeper's DeleteItem of them: between the scan
// that saw them expired and the delete.
type renewing struct {
	sweeper.API
	renew func(ctx context.Context, key map[string]types.AttributeValue)
}

func (r renewing) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.renew(ctx, in.Key)
	return r.API.DeleteItem(ctx, in, o...)
}

// An item renewed between the scan and the delete survives and is not
// counted.
func TestItemRenewedAfterScanSurvives(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		table := e.CreateTable(t, "EffectsTable")
		const n = 20
		expired := seed(t, c, table, "EffectsTable", n)
		later := now.Add(24 * time.Hour)
		api := renewing{API: c, renew: func(_ context.Context, k map[string]types.AttributeValue) {
			if id := k["pk"].(*types.AttributeValueMemberS).Value; id == "k1" || id == "k5" {
				put(t, c, table, "EffectsTable", map[string]int{"k1": 1, "k5": 5}[id], &later)
			}
		}}
		w := &sweeper.Sweeper{API: api, Table: table, KeyAttrs: []string{"pk", "sk"}, Concurrency: 1}
		r, err := w.SweepUntil(ctx(t), now, nil)
		if !expired["k1"] || !expired["k5"] {
			t.Fatal("seed changed: k1 and k5 must be expired")
		}
		if err != nil || r.Deleted != len(expired)-2 || r.Expired != len(expired) || !r.Complete {
			t.Fatalf("%+v %v, want %d deleted", r, err, len(expired)-2)
		}
		delete(expired, "k1")
		delete(expired, "k5")
		checkOnlyExpiredGone(t, c, table, n, expired)
	})
}

// calls counts the sweeper's DynamoDB calls, and its strongly consistent
// scans.
type calls struct {
	sweeper.API
	n, consistent atomic.Int64
}

func (c *calls) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.n.Add(1)
	if aws.ToBool(in.ConsistentRead) {
		c.consistent.Add(1)
	}
	return c.API.Scan(ctx, in, o...)
}

func (c *calls) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.n.Add(1)
	return c.API.DeleteItem(ctx, in, o...)
}

// A stopped sweep issues no call after stop reports true, reports
// Complete false, and the next (stateless) sweep finishes the job.
func TestStopThenResume(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		table := e.CreateTable(t, "FenceTable")
		const n = 40
		expired := seed(t, c, table, "FenceTable", n)
		api := &calls{API: c}
		w := &sweeper.Sweeper{API: api, Table: table, PageSize: 4, Concurrency: 1}
		var checks, callsAtStop int64
		stop := func() bool {
			checks++
			if checks == 12 {
				callsAtStop = api.n.Load()
			}
			return checks >= 12
		}
		r, err := w.SweepUntil(ctx(t), now, stop)
		if err != nil || r.Complete || r.Deleted == 0 || r.Deleted >= len(expired) {
			t.Fatalf("stopped sweep: %+v %v", r, err)
		}
		// Only the delete already dispatched (Concurrency 1) may run after
		// stop; nothing runs once SweepUntil has returned.
		after := api.n.Load()
		if after-callsAtStop > 1 {
			t.Fatalf("%d calls after stop", after-callsAtStop)
		}
		if left := remaining(t, c, table); len(left) != n-r.Deleted {
			t.Fatalf("%d items left, want %d", len(left), n-r.Deleted)
		}
		if api.n.Load() != after {
			t.Fatal("a call ran after SweepUntil returned")
		}
		r2, err := w.SweepUntil(ctx(t), now, nil)
		if err != nil || !r2.Complete || r.Deleted+r2.Deleted != len(expired) {
			t.Fatalf("resumed sweep: %+v %v (first deleted %d, want %d in all)", r2, err, r.Deleted, len(expired))
		}
		checkOnlyExpiredGone(t, c, table, n, expired)
		// The scans read eventually consistent pages (half the read units
		// of consistent ones): every delete is conditional on the expiry
		// anyway, and an item a page did not yet show is swept next time.
		if api.consistent.Load() != 0 {
			t.Fatalf("%d strongly consistent scans", api.consistent.Load())
		}
	})
}

// armAt arms a fault right before the nth call of op, so the error hits
// mid-sweep (after pages were read and items deleted).
type armAt struct {
	sweeper.API
	op  string
	nth int64
	arm func()
	n   atomic.Int64
}

func (a *armAt) count(op string) {
	if op == a.op && a.n.Add(1) == a.nth {
		a.arm()
	}
}

func (a *armAt) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	a.count("Scan")
	return a.API.Scan(ctx, in, o...)
}

func (a *armAt) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	a.count("DeleteItem")
	return a.API.DeleteItem(ctx, in, o...)
}

// An injected DynamoDB error (a 500 with retries off, on the second Scan
// page or the fourth delete) stops the sweep with the error and an exact
// count of what was done; nothing live is deleted; the next sweep
// completes.
func TestInjectedErrors(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, tc := range []struct {
			op  string
			nth int64
		}{{"Scan", 2}, {"DeleteItem", 4}} {
			t.Run(tc.op, func(t *testing.T) {
				f := dynamotest.NewFaults()
				c := e.Client(f.Middleware(), dynamotest.FastRetries, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
				table := e.CreateTable(t, "EffectsTable")
				const n = 30
				expired := seed(t, c, table, "EffectsTable", n)
				api := &armAt{API: c, op: tc.op, nth: tc.nth, arm: func() { f.FailNext(tc.op, 1, dynamotest.InternalServerError()) }}
				w := &sweeper.Sweeper{API: api, Table: table, KeyAttrs: []string{"pk", "sk"}, PageSize: 6, Concurrency: 2}
				r, err := w.SweepUntil(ctx(t), now, nil)
				if err == nil || r.Complete || f.Fired() != 1 {
					t.Fatalf("injected %s error swallowed: %+v %v (fired %d)", tc.op, r, err, f.Fired())
				}
				if r.Deleted == 0 {
					t.Fatalf("the error hit before any delete: %+v", r)
				}
				left := remaining(t, c, table)
				for i := range n {
					k := "k" + strconv.Itoa(i)
					if !expired[k] && !left[k] {
						t.Fatalf("live item %s deleted", k)
					}
				}
				if len(left) != n-r.Deleted {
					t.Fatalf("%d left, but the result says %+v", len(left), r)
				}
				w.API = c
				r2, err := w.SweepUntil(ctx(t), now, nil)
				if err != nil || !r2.Complete || r.Deleted+r2.Deleted != len(expired) {
					t.Fatalf("recovery: %+v %v", r2, err)
				}
				checkOnlyExpiredGone(t, c, table, n, expired)
			})
		}
	})
}

// A cancelled context ends the sweep with its error; a Sweeper without API
// or Table is refused.
func TestCancelAndValidation(t *testing.T) {
	if _, err := (&sweeper.Sweeper{Table: "t"}).Sweep(context.Background(), now); err == nil {
		t.Fatal("Sweeper without API accepted")
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		table := e.CreateTable(t, "FenceTable")
		seed(t, c, table, "FenceTable", 5)
		cctx, cancel := context.WithCancel(context.Background())
		cancel()
		r, err := (&sweeper.Sweeper{API: c, Table: table}).SweepUntil(cctx, now, nil)
		if !errors.Is(err, context.Canceled) || r.Complete || r.Deleted != 0 {
			t.Fatalf("cancelled sweep: %+v %v", r, err)
		}
	})
}

// segmentCut records the segment of every Scan and refuses the first Scan
// of a sweep's second segment, cutting each sweep after one segment.
type segmentCut struct {
	sweeper.API
	starts   int
	segments []int32
}

func (c *segmentCut) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if in.ExclusiveStartKey == nil {
		if c.starts++; c.starts > 1 {
			return nil, errors.New("cut after one segment")
		}
		c.segments = append(c.segments, aws.ToInt32(in.Segment))
	}
	return c.API.Scan(ctx, in, o...)
}

// TestSegmentsRotateHourly: a table swept in Segments parallel-scan
// segments starts each sweep at the segment its hour selects, so sweeps
// cut short after one segment each (a table too large for one run) still
// reach every segment within Segments hourly sweeps, with no cursor kept:
// every expired item is deleted, every live one kept.
func TestSegmentsRotateHourly(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		table := e.CreateTable(t, "FenceTable")
		const n = 40
		expired := map[string]bool{}
		for i := range n {
			exp := now.Add(-time.Hour)
			if i%4 == 0 {
				exp = now.Add(24 * time.Hour)
			} else {
				expired["k"+strconv.Itoa(i)] = true
			}
			put(t, c, table, "FenceTable", i, &exp)
		}
		const segments = 4
		var firsts []int32
		for h := range segments {
			api := &segmentCut{API: c}
			w := &sweeper.Sweeper{API: api, Table: table, PageSize: 3, Concurrency: 1, Segments: segments}
			at := now.Add(time.Duration(h) * time.Hour)
			r, _ := w.SweepUntil(ctx(t), at, nil)
			if r.Complete || r.SegmentsSwept != 1 {
				t.Fatalf("sweep %d: %+v after one of %d segments, want incomplete with the first swept", h, r, segments)
			}
			if len(api.segments) != 1 {
				t.Fatalf("sweep %d: segments started %v", h, api.segments)
			}
			firsts = append(firsts, api.segments[0])
			if want := int32(at.Unix() / 3600 % segments); api.segments[0] != want {
				t.Fatalf("sweep %d at %s began at segment %d, want %d", h, at, api.segments[0], want)
			}
		}
		checkOnlyExpiredGone(t, c, table, n, expired)
		if r, err := (&sweeper.Sweeper{API: c, Table: table, Segments: segments}).SweepUntil(ctx(t), now, nil); err != nil || !r.Complete || r.Deleted != 0 || r.SegmentsSwept != segments {
			t.Fatalf("an uncut sweep after them: %+v %v, want complete with nothing left to delete", r, err)
		}
		t.Logf("first segments of the hourly sweeps: %v", firsts)
	})
}

// attrsSeen records the attribute names of every item the sweeper's Scan
// pages returned, and whether each Scan asked for a projection.
type attrsSeen struct {
	sweeper.API
	mu        sync.Mutex
	names     map[string]bool
	projected bool
}

func (a *attrsSeen) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := a.API.Scan(ctx, in, o...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.projected = in.ProjectionExpression != nil
	if err == nil {
		for _, it := range out.Items {
			for n := range it {
				a.names[n] = true
			}
		}
	}
	return out, err
}

// The scan returns only what the sweep reads, the key attributes and
// expiresAt (a ProjectionExpression built with the expression builder),
// never the records' payloads: the read units are billed on the items
// scanned anyway, but the pages, and the sweeper's memory, stay small.
func TestScanReadsOnlyKeysAndExpiry(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		for _, id := range []string{"EffectsTable", "IdempotencyTable"} {
			table := e.CreateTable(t, id)
			expired := seed(t, c, table, id, 12)
			a := &attrsSeen{API: c, names: map[string]bool{}}
			w := &sweeper.Sweeper{API: a, Table: table, KeyAttrs: keysOf(id), PageSize: 5}
			if r, err := w.SweepUntil(ctx(t), now, nil); err != nil || r.Deleted != len(expired) {
				t.Fatalf("%s: %+v %v, want %d deleted", id, r, err, len(expired))
			}
			want := map[string]bool{"expiresAt": true}
			for _, k := range keysOf(id) {
				want[k] = true
			}
			if !a.projected || !maps.Equal(a.names, want) {
				t.Errorf("%s: projected %v, attributes returned %v; want a projection of %v", id, a.projected, a.names, want)
			}
		}
	})
}
