package devstack

import (
	"context"
	"maps"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
)

// writeFeed stands in for the runs table's stream on an engine without
// DynamoDB Streams (dynalite): every run the stack itself writes (a put the
// engine answered with success, reported by tableWaker.feed) becomes the
// INSERT record the stream would have carried, with the item as its new
// image, and goes through the runs poller's filter and delivery (p): one
// record per call, up to devStreamParallel at once, in order per run,
// retried with the poller's backoff for its retry time.
//
// What it does not do, and the stream does:
//   - It holds its records in memory only. A run written just before
//     `idemkit dev` stops, or whose delivery was still being retried, is
//     not handed over again at the next start; the resumer's stale-run pass
//     drives it once it has had no progress for RUN_STALE_SECONDS.
//   - It sees the writes of this process only: runs another process
//     writes to the same tables wait for that pass too.
//   - A put whose outcome is unknown (an error other than a refusal) is
//     not handed over, since its item may not exist; the stale-run pass
//     drives it if it was written.
//
// The auditor's streams have no stand-in: nothing is audited on such an
// engine.
type writeFeed struct {
	p *poller // the runs poller: filter, key attribute, delivery and retry

	mu      sync.Mutex
	queue   []stream.StreamRecord
	next    uint64
	kick    chan struct{}
	keyAttr []string // the table's key attributes, for the records' Keys
}

// newWriteFeed feeds p from the puts of the stack to p.table; keys are the
// table's key attributes.
func newWriteFeed(p *poller, keys []string) *writeFeed {
	return &writeFeed{p: p, kick: make(chan struct{}, 1), keyAttr: keys}
}

// put queues item as the INSERT record of a new item, if the poller's
// filter passes it. It never blocks. It keeps a copy of the map (the
// writer's input may be reused once the write returns).
func (f *writeFeed) put(item map[string]types.AttributeValue) {
	item = maps.Clone(item)
	keys := make(map[string]types.AttributeValue, len(f.keyAttr))
	for _, k := range f.keyAttr {
		if v, ok := item[k]; ok {
			keys[k] = v
		}
	}
	r := stream.StreamRecord{EventName: "INSERT", Keys: keys, NewImage: item}
	if f.p.filter != nil && !f.p.filter(r) {
		return
	}
	f.mu.Lock()
	f.next++
	r.EventID = "dev-feed-" + strconv.FormatUint(f.next, 10)
	f.queue = append(f.queue, r)
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// run hands the queued records over until ctx ends, then waits for the
// deliveries under way to stop.
func (f *writeFeed) run(ctx context.Context) {
	progress := make(chan struct{}, 1)
	ks := newKeyedShard(f.p.parallel, progress)
	defer ks.wg.Wait()
	var seq uint64
	for {
		ks.settled() // drop the records done from the window
		f.mu.Lock()
		room := ks.room()
		n := min(room, len(f.queue))
		batch := make([]*keyedRec, n)
		for i, r := range f.queue[:n] {
			seq++
			batch[i] = &keyedRec{rec: r, seq: strconv.FormatUint(seq, 10), key: partitionKey(r, f.p.keyAttr)}
		}
		f.queue = append(f.queue[:0], f.queue[n:]...)
		f.mu.Unlock()
		if n > 0 {
			f.p.add(ctx, ks, batch)
		}
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		case <-progress:
		}
	}
}
