package devstack

import (
	"context"
	"maps"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
)

// writeFeed stands in for the runs table's stream on an engine without
// DynamoDB Streams (dynalite): every run the stack itself writes (a put the
// engine answered with success, reported by tableWaker.feed) becomes the
// INSERT record the stream would have carried, with the item as its new
// image, and every item an UpdateItem of the stack changed (answered with
// success) becomes the MODIFY record, with the item as read just before
// the write as its old image and as the write left it as its new image
// (a `:resume`, paused to running, among them: RED_TEAM 591). Each goes
// through the runs poller's filter, the deployed mapping's (a new run's
// INSERT, a resumed run's MODIFY), and delivery (p): one record per call,
// up to devStreamParallel at once, in order per run, retried with the
// poller's backoff for its retry time.
//
// What it does not do, and the stream does:
//   - It holds its records in memory only. A run written just before
//     `idemkit dev` stops, or whose delivery was still being retried, is
//     not handed over again at the next start; the resumer's stale-run pass
//     drives it once it has had no progress for RUN_STALE_SECONDS.
//   - It sees the writes of this process only: runs another process
//     writes to the same tables wait for that pass too.
//   - A put or update whose outcome is unknown (an error other than a
//     refusal) is not handed over, since its item may not exist or not
//     have changed; the stale-run pass drives it if it was written.
//   - An update's old image is read just before the write, not taken
//     from it: a write of another part of the stack landing between the
//     read and the update makes the record's old image that write's. The
//     updates that matter are conditional on the run as read (a resume
//     on the run paused, at its version), so for them the image read is
//     the one replaced; a record handed over twice this way is fenced by
//     the executor's claim on the run, as a stream's redelivery is.
//   - A transaction's updates are not handed over (the stack resumes no
//     run in a transaction).
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
	f.hand(stream.StreamRecord{EventName: "INSERT", NewImage: maps.Clone(item)})
}

// modify queues the MODIFY record of an item changed from old to item, if
// the poller's filter passes it. It never blocks, and keeps copies of the
// maps.
func (f *writeFeed) modify(old, item map[string]types.AttributeValue) {
	f.hand(stream.StreamRecord{EventName: "MODIFY", OldImage: maps.Clone(old), NewImage: maps.Clone(item)})
}

// hand queues r, its Keys taken from its new image, if the poller's filter
// passes it.
func (f *writeFeed) hand(r stream.StreamRecord) {
	keys := make(map[string]types.AttributeValue, len(f.keyAttr))
	for _, k := range f.keyAttr {
		if v, ok := r.NewImage[k]; ok {
			keys[k] = v
		}
	}
	r.Keys = keys
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

// consistentGet is a consistent read of an item of a table by its key
// through c, for a feed's update images (tableWaker.feed).
func consistentGet(c *dynamodb.Client) func(ctx context.Context, table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	return func(ctx context.Context, table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		return out.Item, nil
	}
}
