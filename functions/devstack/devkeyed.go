package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/tables"
)

// devStreamParallel is how many records of one shard a keyed poller (the
// runs stream's: dev's executor) hands to its handler at once, one record
// per call: the deployed executor's event source mapping runs batches of
// one record (BatchSize: 1), up to ten of them per shard at once
// (ParallelizationFactor: 10), in order per partition key.
const devStreamParallel = 10

// devStreamWindow bounds the records of one shard a keyed poller has read
// and not yet passed with its checkpoint: a record still running (or being
// retried) keeps the records read after it in the window, handled or not,
// and a full window stops reading until it ends. So a slow run holds back
// only its own key's records and, past this many later records, the
// shard's reading; it never holds back the handling of the records already
// read.
const devStreamWindow = 1000

// devKeyedBusyGather is a keyed poller's gathering pause while its
// handlers are running: 250 ms, the rate at which the deployed mapping
// polls a shard (four times a second). Every transition the executor
// writes wakes the runs poller; with the 50 ms pause of an idle executor
// (devPollGather) a busy one polled after nearly every transition (0.30
// GetRecords per run against 0.03 when the executor held the poller, at
// 32 clients on DynamoDB Local). A new run waits at most this long for
// the next poll while others run; an idle executor's poller still polls
// devPollGather after the wake-up.
//
// devCheckpointEvery is how often, at most, a keyed poller writes a
// checkpoint while records are being handled; it writes one at once when
// everything read is done. A checkpoint written later only means more
// records read again after a restart (every handler is idempotent); it
// never passes a record not yet done.
const (
	devKeyedBusyGather = 250 * time.Millisecond
	devCheckpointEvery = time.Second
)

// keyedRec is one record a keyed poller read, in the shard's window.
type keyedRec struct {
	rec  stream.StreamRecord
	seq  string // its sequence number
	key  string // its partition key ("" for a record nothing handles)
	done bool   // handled, dropped after its retry time, or handled by nothing
}

// keyedShard is a keyed poller's state of one shard, shared with the
// goroutines handling its keys.
//
// The guarantees, the deployed mapping's with BatchSize 1 and a
// ParallelizationFactor:
//   - Records of one partition key are handed over one at a time, in the
//     stream's order: the next only once the one before it was handled (or
//     dropped after its retry time).
//   - Records of different keys are handed over concurrently, at most
//     parallel at once per shard: a slow or failing record holds back its
//     own key only.
//   - A failed record is retried (the poller's backoff, bounded by its
//     retry time) with every later record of its key behind it; the
//     records of other keys go on. Lambda's documentation promises order
//     only per partition key and leaves open whether a failing batch also
//     holds back keys that share its concurrent batch; dev holds back the
//     failing key alone, the least a deployed executor can count on, so
//     code that works in dev relies on nothing the mapping does not
//     promise.
//   - The checkpoint advances only past records that are done: it is the
//     sequence number of the last record of the window's longest done
//     prefix. A record handled after an unhandled one is read again after
//     a restart (every handler is idempotent); an unhandled one is never
//     skipped.
type keyedShard struct {
	mu       sync.Mutex
	window   []*keyedRec            // read, in order, after the checkpoint
	queues   map[string][]*keyedRec // per key, the records not yet done; the head is being handled
	sem      chan struct{}          // the records being handled
	wg       sync.WaitGroup         // the key goroutines
	progress chan<- struct{}        // the poller's: a record ended with nothing else in flight, or the window had room again
	inFlight int                    // keys with a goroutine
	// readEnd is the sequence number of the last record read: the next
	// iterator starts after it (reading is ahead of the checkpoint).
	readEnd string
}

func newKeyedShard(parallel int, progress chan<- struct{}) *keyedShard {
	if parallel <= 0 {
		parallel = devStreamParallel
	}
	return &keyedShard{queues: map[string][]*keyedRec{}, sem: make(chan struct{}, parallel), progress: progress}
}

// partitionKey is r's value of the attribute name, as a map key.
func partitionKey(r stream.StreamRecord, name string) string {
	switch v := r.Keys[name].(type) {
	case *types.AttributeValueMemberS:
		return "S" + v.Value
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberB:
		return "B" + string(v.Value)
	}
	return "?" // no such key attribute: all such records in one order
}

// room is how many more records the window takes.
func (ks *keyedShard) room() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return devStreamWindow - len(ks.window)
}

// settled pops the window's done prefix and returns the sequence number
// of its last record ("" when nothing was popped).
func (ks *keyedShard) settled() string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	n := 0
	for n < len(ks.window) && ks.window[n].done {
		n++
	}
	if n == 0 {
		return ""
	}
	seq := ks.window[n-1].seq
	clear(ks.window[:n])
	ks.window = ks.window[n:]
	return seq
}

// idle reports whether every record read is done.
func (ks *keyedShard) idle() bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.inFlight == 0
}

func (ks *keyedShard) signal() {
	select {
	case ks.progress <- struct{}{}:
	default:
	}
}

// add puts records read from the shard into the window and hands the
// handled ones to their keys' goroutines (starting one for a key that has
// none).
func (p *poller) add(ctx context.Context, ks *keyedShard, recs []*keyedRec) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, r := range recs {
		ks.window = append(ks.window, r)
		ks.readEnd = r.seq
		if r.done {
			continue
		}
		q := ks.queues[r.key]
		ks.queues[r.key] = append(q, r)
		if len(q) == 0 {
			ks.inFlight++
			ks.wg.Add(1)
			go p.drainKey(ctx, ks, r.key)
		}
	}
}

// drainKey hands the records of one key over one after the other until
// none is left, or ctx ends (the record being handled stays undone: the
// checkpoint stays before it).
func (p *poller) drainKey(ctx context.Context, ks *keyedShard, key string) {
	defer ks.wg.Done()
	for {
		ks.mu.Lock()
		q := ks.queues[key]
		if len(q) == 0 {
			delete(ks.queues, key)
			ks.inFlight--
			quiet := ks.inFlight == 0
			ks.mu.Unlock()
			if quiet {
				ks.signal()
			}
			return
		}
		r := q[0]
		ks.mu.Unlock()
		if !p.deliver(ctx, ks, r) {
			return
		}
		ks.mu.Lock()
		r.done = true
		ks.queues[key] = ks.queues[key][1:]
		full := len(ks.window) >= devStreamWindow
		ks.mu.Unlock()
		if full {
			ks.signal()
		}
	}
}

// deliver hands r to the handler until it is handled, retrying it with the
// poller's backoff for as long as it has been failing for less than the
// retry time, then drops it (logged as sent to the on-failure
// destination; the stale-run pass still drives its run). It reports false
// when ctx ended first: r is not done.
func (p *poller) deliver(ctx context.Context, ks *keyedShard, r *keyedRec) bool {
	var since time.Time
	tries := 0
	for {
		select {
		case ks.sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		retry := p.handle(ctx, []stream.StreamRecord{r.rec})
		<-ks.sem
		if len(retry) == 0 {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if tries == 0 {
			since = p.clock()
		}
		tries++
		if failing := p.clock().Sub(since); failing >= p.retryTime() {
			p.log.Error("dev: stream record still failing after the retry time; sent to the on-failure destination",
				slog.String("stream", p.name), slog.String("event_id", r.rec.EventID), slog.Int("tries", tries), slog.Int64("failing_for_ms", failing.Milliseconds()))
			return true
		}
		p.wait(ctx, p.backoff(tries))
	}
}

// stepKeyed is step for a keyed poller: it writes the checkpoint past the
// records done since the last step and reads the next records when the
// window has room; it reports whether there was work.
func (p *poller) stepKeyed(ctx context.Context, id string, st *shardState) (busy bool) {
	ks := st.keyed
	// One checkpoint write per step at most, past everything done by its
	// end: at once when nothing is in flight, else at most every
	// devCheckpointEvery.
	if seq := ks.settled(); seq != "" {
		st.batchEnd = seq
	}
	defer func() {
		if seq := ks.settled(); seq != "" {
			st.batchEnd = seq
		}
		if st.batchEnd != st.checkpoint && (ks.idle() || time.Since(st.checkpointAt) >= devCheckpointEvery) {
			p.handled(ctx, id, st)
			st.checkpointAt = time.Now()
		}
	}()
	room := ks.room()
	if room <= 0 {
		return false
	}
	if st.needIter {
		// Reading resumes after the last record read (records read and
		// not done are in the window, not lost), else at the checkpoint.
		ks.mu.Lock()
		after := ks.readEnd
		ks.mu.Unlock()
		if after == "" {
			after = st.checkpoint
		}
		if err := p.acquireAfter(ctx, id, st, after); err != nil {
			if ctx.Err() == nil {
				p.log.Warn("dev: get shard iterator", slog.String("stream", p.name), slog.String("shard", id), slog.String("error", err.Error()))
			}
			return false
		}
	}
	if st.iter == nil {
		// A closed shard is done once everything read from it is.
		st.done = ks.idle() && ks.room() == devStreamWindow
		return false
	}
	out, err := p.sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: st.iter, Limit: aws.Int32(int32(min(room, 100)))})
	if err != nil {
		var trimmed *streamtypes.TrimmedDataAccessException
		var expired *streamtypes.ExpiredIteratorException
		if !errors.As(err, &trimmed) && !errors.As(err, &expired) && ctx.Err() == nil {
			p.log.Warn("dev: get records", slog.String("stream", p.name), slog.String("shard", id), slog.String("error", err.Error()))
		}
		// Take a new iterator after the last record read (an expired
		// one, a trimmed position, or an engine that forgot it).
		st.needIter = ctx.Err() == nil
		return false
	}
	st.iter = out.NextShardIterator
	recs := make([]*keyedRec, 0, len(out.Records))
	for _, r := range out.Records {
		if r.Dynamodb == nil || r.Dynamodb.SequenceNumber == nil {
			continue
		}
		kr := &keyedRec{seq: *r.Dynamodb.SequenceNumber, done: true}
		sr, err := stream.FromStreams(r)
		if err != nil {
			p.log.Error("dev: undecodable stream record", slog.String("stream", p.name), slog.String("error", err.Error()))
		} else if p.filter == nil || p.filter(sr) {
			kr.rec, kr.key, kr.done = sr, partitionKey(sr, p.keyAttr), false
		}
		recs = append(recs, kr)
	}
	if len(recs) == 0 {
		return false
	}
	p.add(ctx, ks, recs)
	return true
}

// templateKeyAttrs are the key attributes of the template.yaml table
// logicalID: its partition key first, then its sort key if it has one.
func templateKeyAttrs(logicalID string) ([]string, error) {
	defs, err := tables.Embedded()
	if err != nil {
		return nil, err
	}
	var keys []string
	hash := false
	for _, k := range defs[logicalID].KeySchema {
		switch {
		case k.AttributeName == nil:
		case k.KeyType == types.KeyTypeHash:
			keys, hash = append([]string{*k.AttributeName}, keys...), true
		default:
			keys = append(keys, *k.AttributeName)
		}
	}
	if !hash {
		return nil, fmt.Errorf("devstack: template.yaml's %s has no partition key", logicalID)
	}
	return keys, nil
}

// templateHashKey is the partition key attribute of the template.yaml
// table logicalID.
func templateHashKey(logicalID string) (string, error) {
	keys, err := templateKeyAttrs(logicalID)
	if err != nil {
		return "", err
	}
	return keys[0], nil
}
