// Package regionsim simulates a two-region DynamoDB global table in MREC
// mode for tests: two independent tables (two moto regions on one server,
// or two emulator processes) joined by a Replicator that reads each table's
// stream and applies every local write to the other region,
// last-writer-wins, with a configurable lag and a partition switch.
//
// What it reproduces from a real MREC global table: a conditional write is
// checked only against the local replica; during a partition both regions
// accept conflicting writes; on healing the later write (by the write's
// timestamp, ties broken by region name) overwrites the other everywhere,
// and the loser's write leaves no trace except in the stream of the region
// where it was overwritten (the conflict audit reads that). With
// Config.Coalesce, a region's writes to one item that are due together
// replicate as one change, the last: the other region sees only the final
// image (a claim and its end merged). A replicated deletion of an item the
// destination no longer holds deletes nothing and, as in DynamoDB, leaves
// no stream record there. What it does not: an apply is not atomic with a
// concurrent local write in the destination (tests quiesce writers before
// Sync); it has exactly two regions; a write's last-writer-wins timestamp
// is when the replicator observed it (or Config.Timestamp), not DynamoDB's
// clock; and an apply that changes nothing (the destination already holds
// that image) writes a stream record on moto, where DynamoDB writes none
// (a consumer sees a change whose two images are one).
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
	// A and B are the two regions. Required.
	A, B Region
	// KeyAttrs are the primary-key attribute names. Default ["pk"].
	KeyAttrs []string
	// Lag is the replication delay: a local write is applied to the other
	// region no earlier than Lag after the replicator observed it. Default 0.
	Lag time.Duration
	// Timestamp returns a write's LWW timestamp from its new image (e.g. the
	// ledger's updatedAt in Unix ms), ok false when the image has none.
	// Default nil: the observation time (Now at the Step that read it).
	Timestamp func(image map[string]types.AttributeValue) (ts int64, ok bool)
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnChange, if set, receives every change read from either stream,
	// including the replicator's own applies (a stream consumer such as
	// the conflict auditor sees exactly what a real stream carries).
	OnChange func(Change)
	// Coalesce makes replication apply only the last of a region's writes
	// to one item that are due together: a real global table may replicate
	// several writes to one item as one change, so the other region sees
	// the final image alone (its stream: one change from what it held to
	// that image; a claim and its end merged). Default false: every write
	// is applied, each as its own change.
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

type pending struct {
	change Change
	ver    version
	due    time.Time
}

// Replicator joins two regions. Safe for concurrent use (calls serialise).
type Replicator struct {
	mu          sync.Mutex
	cfg         Config
	readers     map[string]*Reader
	other       map[string]*Region
	queue       []pending                     // not yet applied, in observation order
	last        map[string]map[string]version // region -> item key -> last write applied there
	echoes      map[string]map[string]int     // region -> echoKey -> expected echoes
	partitioned bool
	seq         uint64
	applied     int
	discarded   int
	coalesced   int
}

// New returns a Replicator. Both tables must have a NEW_AND_OLD_IMAGES
// stream (regionsim reads it from the start).
func New(cfg Config) (*Replicator, error) {
	if cfg.A.DB == nil || cfg.B.DB == nil || cfg.A.Streams == nil || cfg.B.Streams == nil || cfg.A.Table == "" || cfg.B.Table == "" {
		return nil, errors.New("regionsim: both regions need DB, Streams and Table")
	}
	if cfg.A.Name == "" || cfg.A.Name == cfg.B.Name {
		return nil, errors.New("regionsim: regions need distinct names")
	}
	if len(cfg.KeyAttrs) == 0 {
		cfg.KeyAttrs = []string{"pk"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Replicator{cfg: cfg,
		readers: map[string]*Reader{
			cfg.A.Name: NewReader(cfg.A.Name, cfg.A.DB, cfg.A.Streams, cfg.A.Table),
			cfg.B.Name: NewReader(cfg.B.Name, cfg.B.DB, cfg.B.Streams, cfg.B.Table),
		},
		last:   map[string]map[string]version{cfg.A.Name: {}, cfg.B.Name: {}},
		echoes: map[string]map[string]int{cfg.A.Name: {}, cfg.B.Name: {}},
	}
	r.other = map[string]*Region{cfg.A.Name: &r.cfg.B, cfg.B.Name: &r.cfg.A}
	return r, nil
}

// SetPartitioned turns the partition switch: while on, nothing is applied
// across regions (writes keep queueing and are applied, LWW, on healing).
func (r *Replicator) SetPartitioned(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partitioned = on
}

// Stats returns how many replicated writes were applied and how many were
// discarded because the destination held a newer write (LWW losers).
func (r *Replicator) Stats() (applied, discarded int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, r.discarded
}

// Pending returns the number of observed writes not yet applied.
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

// Step reads both streams once and applies every due write (unless
// partitioned). It returns the number of new local writes observed plus
// writes applied or discarded, so Sync can tell when nothing moves.
func (r *Replicator) Step(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	moved := 0
	names := []string{r.cfg.A.Name, r.cfg.B.Name}
	sort.Strings(names)
	for _, name := range names {
		changes, err := r.readers[name].Read(ctx)
		if err != nil {
			return moved, err
		}
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
			r.queue = append(r.queue, pending{change: c, ver: ver, due: now.Add(r.cfg.Lag)})
			moved++
		}
	}
	if r.partitioned {
		return moved, nil
	}
	superseded := r.superseded(now)
	rest := r.queue[:0]
	for i, p := range r.queue {
		if now.Before(p.due) {
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

// superseded marks, under Coalesce, each due write that a later due write
// of the same region to the same item replaces: only the last is applied.
func (r *Replicator) superseded(now time.Time) map[int]bool {
	if !r.cfg.Coalesce {
		return nil
	}
	out := map[int]bool{}
	lastOf := map[string]int{}
	for i, p := range r.queue {
		if now.Before(p.due) {
			continue
		}
		k := p.change.Region + "\x00" + r.itemKey(p.change.Keys)
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

// apply writes p to the other region if it is newer than the last write
// there (last writer wins), else discards it.
func (r *Replicator) apply(ctx context.Context, p pending) error {
	dst := r.other[p.change.Region]
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

// Sync steps until a Step moves nothing (bounded), i.e. both regions have
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
