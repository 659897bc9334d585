// Package regionsim simulates a DynamoDB global table in MREC mode for
// tests: independent tables, one per region (moto regions on one server, or
// emulator processes), joined by a Replicator that reads each table's
// stream and applies every local write to every other region,
// last-writer-wins, with a configurable lag and a partition switch per pair
// of regions. Two regions (Config.A and Config.B) or more
// (Config.Regions).
//
// What it reproduces from a real MREC global table: a conditional write is
// checked only against the local replica; during a partition the regions on
// each side accept conflicting writes; each write replicates from the
// region it was made in straight to each other region (a replicated write
// is not replicated again), so a region cut off from one region still
// receives the others' writes, and receives that region's on healing; every
// region ends on the later write (by the write's timestamp, ties broken by
// region name), whatever the order writes reach it in, and the loser's
// write leaves no trace except in the streams of the regions where it was
// overwritten (the conflict audit reads them). With Config.Coalesce, a
// region's writes to one item that are due together at one destination
// replicate there as one change, the last: that region sees only the final
// image (a claim and its end merged). A replicated deletion of an item the
// destination no longer holds deletes nothing and, as in DynamoDB, leaves
// no stream record there. What it does not: an apply is not atomic with a
// concurrent local write in the destination (tests quiesce writers before
// Sync); a partition cuts both directions of a pair at once; a write's
// last-writer-wins timestamp is when the replicator observed it (or
// Config.Timestamp), not DynamoDB's clock; and an apply that changes
// nothing (the destination already holds that image) writes a stream
// record on moto, where DynamoDB writes none (a consumer sees a change
// whose two images are one).
//
// Steps are explicit (Step, Sync) and the clock is injected, so tests need
// no sleeps.
package regionsim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// Region is one replica: a table and the clients of its region.
type Region struct {
	// Name is the region name, e.g. "us-east-1"; the LWW tie-breaker.
	Name string
	// DB and Streams are clients signing for this region.
	DB      *dynamodb.Client
	Streams *dynamodbstreams.Client
	// Table is the replica's table name in this region.
	Table string
}

// Config configures a Replicator.
type Config struct {
	// A and B are the two regions of a two-region table. Required unless
	// Regions is set.
	A, B Region
	// Regions are the replicas of a table of two regions or more, in
	// place of A and B (which must then be unset).
	Regions []Region
	// KeyAttrs are the primary-key attribute names. Default ["pk"].
	KeyAttrs []string
	// Lag is the replication delay: a local write is applied to each other
	// region no earlier than Lag after the replicator observed it. Default 0.
	Lag time.Duration
	// Timestamp returns a write's LWW timestamp from its new image (e.g. the
	// ledger's updatedAt in Unix ms), ok false when the image has none.
	// Default nil: the observation time (Now at the Step that read it).
	Timestamp func(image map[string]types.AttributeValue) (ts int64, ok bool)
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnChange, if set, receives every change read from any region's stream,
	// including the replicator's own applies (a stream consumer such as
	// the conflict auditor sees exactly what a real stream carries).
	OnChange func(Change)
	// Coalesce makes replication apply only the last of a region's writes
	// to one item that are due together at one destination: a real global
	// table may replicate several writes to one item as one change, so the
	// destination sees the final image alone (its stream: one change from
	// what it held to that image; a claim and its end merged). Default
	// false: every write is applied, each as its own change.
	Coalesce bool
}

// version orders writes to one item: timestamp, then region name, then
// observation order (which keeps one region's writes with equal timestamps
// in stream order).
type version struct {
	ts     int64
	region string
	seq    uint64
}

func (v version) newer(o version) bool {
	if v.ts != o.ts {
		return v.ts > o.ts
	}
	if v.region != o.region {
		return v.region > o.region
	}
	return v.seq > o.seq
}

// pending is one observed write on its way to one destination region.
type pending struct {
	change Change
	dst    string
	ver    version
	due    time.Time
}

// link names the pair of regions a and b, in either order.
type link struct{ lo, hi string }

func linkOf(a, b string) link {
	if b < a {
		a, b = b, a
	}
	return link{a, b}
}

// Replicator joins two regions or more. Safe for concurrent use (calls
// serialise).
type Replicator struct {
	mu        sync.Mutex
	cfg       Config
	names     []string // region names, sorted
	regions   map[string]*Region
	readers   map[string]*Reader
	queue     []pending                     // not yet applied, in observation order
	last      map[string]map[string]version // region -> item key -> last write applied there
	echoes    map[string]map[string]int     // region -> echoKey -> expected echoes
	cut       map[link]bool                 // pairs of regions partitioned
	seq       uint64
	applied   int
	discarded int
	coalesced int
}

// New returns a Replicator. Every table must have a NEW_AND_OLD_IMAGES
// stream (regionsim reads it from the start).
func New(cfg Config) (*Replicator, error) {
	regions := cfg.Regions
	if len(regions) == 0 {
		regions = []Region{cfg.A, cfg.B}
	} else if cfg.A != (Region{}) || cfg.B != (Region{}) {
		return nil, errors.New("regionsim: set Regions or A and B, not both")
	}
	if len(regions) < 2 {
		return nil, errors.New("regionsim: a global table needs two regions or more")
	}
	if len(cfg.KeyAttrs) == 0 {
		cfg.KeyAttrs = []string{"pk"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Regions = append([]Region(nil), regions...)
	r := &Replicator{cfg: cfg, regions: map[string]*Region{}, readers: map[string]*Reader{},
		last: map[string]map[string]version{}, echoes: map[string]map[string]int{}, cut: map[link]bool{}}
	for i := range r.cfg.Regions {
		g := &r.cfg.Regions[i]
		if g.DB == nil || g.Streams == nil || g.Table == "" {
			return nil, errors.New("regionsim: every region needs DB, Streams and Table")
		}
		if g.Name == "" || r.regions[g.Name] != nil {
			return nil, errors.New("regionsim: regions need distinct names")
		}
		r.regions[g.Name] = g
		r.names = append(r.names, g.Name)
		r.readers[g.Name] = NewReader(g.Name, g.DB, g.Streams, g.Table)
		r.last[g.Name], r.echoes[g.Name] = map[string]version{}, map[string]int{}
	}
	sort.Strings(r.names)
	return r, nil
}

// SetPartitioned turns the partition switch of every pair of regions:
// while on, nothing is applied across regions (writes keep queueing and
// are applied, LWW, on healing).
func (r *Replicator) SetPartitioned(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range r.names {
		for _, b := range r.names[i+1:] {
			r.setCut(a, b, on)
		}
	}
}

// SetPartitionedBetween turns the partition switch of the pair of regions
// a and b (both directions): while on, neither region's writes are applied
// in the other (they keep queueing and are applied, LWW, on healing), and
// both keep replicating with every other region. It panics on a region
// the replicator does not join.
func (r *Replicator) SetPartitionedBetween(a, b string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known(a)
	r.known(b)
	if a == b {
		panic("regionsim: a region is not partitioned from itself")
	}
	r.setCut(a, b, on)
}

// Isolate turns the partition switch of every pair that holds region: while
// on, region is cut off from every other region, which keep replicating
// among themselves. It panics on a region the replicator does not join.
func (r *Replicator) Isolate(region string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known(region)
	for _, b := range r.names {
		if b != region {
			r.setCut(region, b, on)
		}
	}
}

func (r *Replicator) known(region string) {
	if r.regions[region] == nil {
		panic("regionsim: no region " + region)
	}
}

func (r *Replicator) setCut(a, b string, on bool) {
	if on {
		r.cut[linkOf(a, b)] = true
	} else {
		delete(r.cut, linkOf(a, b))
	}
}

// Regions returns the names of the regions the replicator joins, sorted.
func (r *Replicator) Regions() []string {
	return append([]string(nil), r.names...)
}

// Stats returns how many replicated writes were applied and how many were
// discarded because the destination held a newer write (LWW losers), each
// counted once per destination region.
func (r *Replicator) Stats() (applied, discarded int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, r.discarded
}

// Pending returns the number of deliveries not yet applied: one per
// observed write and region it has not reached yet (with two regions, the
// number of observed writes not yet applied).
func (r *Replicator) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

func (r *Replicator) itemKey(keys map[string]types.AttributeValue) string {
	parts := make([]string, 0, len(r.cfg.KeyAttrs))
	for _, k := range r.cfg.KeyAttrs {
		parts = append(parts, canon(map[string]types.AttributeValue{k: keys[k]}))
	}
	return strings.Join(parts, "|")
}

// Step reads every region's stream once (in the order of their names) and
// applies every due write to every region it is not partitioned from. It
// returns the number of changes read (local writes and the echoes of
// applies, to which OnChange may have answered with a write) plus
// deliveries applied or discarded, so Sync can tell when nothing moves.
func (r *Replicator) Step(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	moved := 0
	for _, name := range r.names {
		changes, err := r.readers[name].Read(ctx)
		if err != nil {
			return moved, err
		}
		// Every change read moves: OnChange may have written in
		// response to it (an auditor's write-back), even to an echo.
		moved += len(changes)
		for _, c := range changes {
			if r.cfg.OnChange != nil {
				r.cfg.OnChange(c)
			}
			sig := r.echoKey(c)
			if r.echoes[name][sig] > 0 { // our own apply coming back
				r.echoes[name][sig]--
				continue
			}
			r.seq++
			ver := version{ts: now.UnixNano(), region: name, seq: r.seq}
			if r.cfg.Timestamp != nil && c.New != nil {
				if ts, ok := r.cfg.Timestamp(c.New); ok {
					ver.ts = ts
				}
			}
			// A local write was applied over whatever the region held, so
			// it is newer than that (a real table stamps it with the
			// server's clock): bump a timestamp that says otherwise.
			k := r.itemKey(c.Keys)
			if prev := r.last[name][k]; !ver.newer(prev) {
				ver.ts = prev.ts + 1
			}
			r.last[name][k] = ver
			for _, dst := range r.names {
				if dst != name {
					r.queue = append(r.queue, pending{change: c, dst: dst, ver: ver, due: now.Add(r.cfg.Lag)})
				}
			}
		}
	}
	superseded := r.superseded(now)
	rest := r.queue[:0]
	for i, p := range r.queue {
		if !r.deliverable(p, now) {
			rest = append(rest, p)
			continue
		}
		if superseded[i] {
			r.coalesced++
			moved++
			continue
		}
		if err := r.apply(ctx, p); err != nil {
			r.queue = append(rest, r.queue[i:]...)
			return moved, err
		}
		moved++
	}
	r.queue = rest
	return moved, nil
}

// deliverable reports whether p is due and its link is not partitioned.
func (r *Replicator) deliverable(p pending, now time.Time) bool {
	return !now.Before(p.due) && !r.cut[linkOf(p.change.Region, p.dst)]
}

// superseded marks, under Coalesce, each deliverable write that a later
// deliverable write of the same region to the same item, bound for the
// same destination, replaces: only the last is applied.
func (r *Replicator) superseded(now time.Time) map[int]bool {
	if !r.cfg.Coalesce {
		return nil
	}
	out := map[int]bool{}
	lastOf := map[string]int{}
	for i, p := range r.queue {
		if !r.deliverable(p, now) {
			continue
		}
		k := p.change.Region + "\x00" + p.dst + "\x00" + r.itemKey(p.change.Keys)
		if j, ok := lastOf[k]; ok {
			out[j] = true
		}
		lastOf[k] = i
	}
	return out
}

// Coalesced returns how many replicated writes Coalesce merged into a
// later write of the same item (never applied on their own).
func (r *Replicator) Coalesced() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.coalesced
}

// apply writes p to its destination region if it is newer than the last
// write there (last writer wins), else discards it.
func (r *Replicator) apply(ctx context.Context, p pending) error {
	dst := r.regions[p.dst]
	k := r.itemKey(p.change.Keys)
	if !p.ver.newer(r.last[dst.Name][k]) {
		r.discarded++
		return nil
	}
	// The apply's own change in dst's stream is recognised as an echo
	// (never replicated back). A deletion of an item dst does not hold
	// deletes nothing and, as in DynamoDB, leaves no stream record: no
	// echo is expected then, or the next deletion made in dst would be
	// taken for it and never replicate.
	echo := true
	if p.change.New != nil {
		_, err := dst.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(dst.Table), Item: p.change.New})
		if err != nil {
			return fmt.Errorf("regionsim: apply to %s: %w", dst.Name, err)
		}
	} else {
		out, err := dst.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(dst.Table), Key: p.change.Keys,
			ReturnValues: types.ReturnValueAllOld})
		if err != nil {
			return fmt.Errorf("regionsim: apply to %s: %w", dst.Name, err)
		}
		echo = len(out.Attributes) > 0
	}
	r.last[dst.Name][k] = p.ver
	if echo {
		r.echoes[dst.Name][r.echoKey(p.change)]++
	}
	r.applied++
	return nil
}

// echoKey names a change for echo recognition: its item and its new image
// (a deletion's is its item alone), so the echo of one item's apply is
// never taken for another item's local write.
func (r *Replicator) echoKey(c Change) string {
	return r.itemKey(c.Keys) + "\x00" + canon(c.New)
}

// Sync steps until a Step moves nothing (bounded), i.e. every region has
// converged unless partitioned or lagging. Quiesce writers first.
func (r *Replicator) Sync(ctx context.Context) error {
	for range 100 {
		n, err := r.Step(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
	return errors.New("regionsim: replication did not settle after 100 steps")
}
