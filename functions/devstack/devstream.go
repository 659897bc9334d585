package devstack

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/idemkit/idemkit/functions/host/stream"
)

// batchFunc handles a batch and returns the event ids to retry (the first
// failed record and everything after it), like a Lambda partial batch
// response.
type batchFunc func(ctx context.Context, recs []stream.StreamRecord) (retry []string)

// poller drives a handler from a table's stream the way a Lambda event
// source mapping does: per shard, in order, from the shard's checkpoint
// (the last sequence number whose batch was handled or dropped), or from
// TRIM_HORIZON for a shard without one. A keyed poller (parallel > 0, the
// runs stream's) hands one record per call, several at once, in order per
// partition key (devkeyed.go); what follows describes a batch poller, and
// holds for a keyed one per record and its key's later records.
//
// Retries are bounded by time, not by a count: a failed batch tail is
// retried with backoff (doubling from 200 ms, at most backoffMax) for as
// long as its first record has been failing for less than retryFor, however
// many tries that takes, so a store outage shorter than retryFor loses
// nothing. Only then is that one record dropped (logged as sent to the
// on-failure destination; the stale-run pass still drives its run), and
// the records behind it are handed over. While a record
// is being retried the checkpoint stays before it: a restarted poller reads
// it again. An iterator the engine no longer honours (expired, past trimmed
// data, or lost with a restarted engine) is replaced by a new one at the
// checkpoint.
type poller struct {
	name     string
	sc       *dynamodbstreams.Client
	arn      string
	table    string // whose stream the poller reads
	handle   batchFunc
	log      *slog.Logger
	interval time.Duration
	// retryFor is how long a failing record is retried before it is
	// dropped (STREAM_RETRY_SECONDS; 0: devStreamRetryFor).
	retryFor time.Duration
	// backoffMax caps the backoff between two tries (0: 5 s).
	backoffMax time.Duration
	// now and sleep are the retry clock (nil: time.Now and a timer
	// honouring ctx); tests inject a manual one.
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration)
	filter func(stream.StreamRecord) bool
	// cp keeps the per-shard checkpoints; nil keeps none (every start
	// reads from TRIM_HORIZON).
	cp checkpoints
	// idleMax bounds the idle backoff between polls (0: devIdlePoll).
	idleMax time.Duration
	// wake, when set, ends an idle wait: `idemkit dev` signals it after
	// every write of the stack to this poller's table (tableWaker) and
	// after every resume pass that executed runs (waker), so an idle stack
	// polls rarely and still picks up new records without waiting out its
	// backoff (the poll follows the wake-up after the gathering pause).
	wake <-chan struct{}
	// gather is how long records gather after a wake-up or a handled batch
	// before the next poll (0: devPollGather).
	gather time.Duration
	// parallel, when above 0, makes the poller keyed (devkeyed.go): handle
	// is called with one record at a time, up to parallel at once per
	// shard, in order per partition key (the record's keyAttr), as the
	// deployed executor's mapping (BatchSize 1, ParallelizationFactor)
	// does. 0: one batch at a time, in order, as the auditor's mappings
	// (BatchSize 100) do.
	parallel int
	// keyAttr names the table's partition key attribute (keyed pollers).
	keyAttr string
}

// devIdlePoll is the longest wait between two polls of an idle stream, and
// devIdleDescribe how often an idle poller looks for new shards (2 s while
// records flow). Records the stack writes itself do not wait for either:
// the write wakes its table's poller (poller.wake), and after a wake-up the
// backoff starts again from the poll interval (100 ms, doubling), so a
// record the engine shows a moment late is read a moment later. Only a
// record some other process writes waits up to devIdlePoll.
const (
	devIdlePoll     = 30 * time.Second
	devIdleDescribe = 30 * time.Second
)

// waker wakes every idle poller (non-blocking; a wake-up already pending is
// enough): a resume pass that executed runs sends it. The stack's own
// writes wake only the pollers of the tables they wrote (tableWaker).
type waker []chan struct{}

func newWaker(n int) waker {
	w := make(waker, n)
	for i := range w {
		w[i] = make(chan struct{}, 1)
	}
	return w
}

func (w waker) kick() {
	for _, c := range w {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

type shardState struct {
	iter     *string
	needIter bool // iter must be (re)acquired at the checkpoint
	pending  []stream.StreamRecord
	// batchEnd is the sequence number of the last record read (filtered
	// out or not): the checkpoint once pending is handled.
	batchEnd string
	// checkpoint is the last sequence number handled ("" for none).
	checkpoint string
	// checkpointAt is when a keyed poller last wrote the checkpoint.
	checkpointAt time.Time
	// retries counts the tries of the failing tail that starts at
	// failing (an event id), first failed at failingSince.
	retries      int
	failing      string
	failingSince time.Time
	done         bool
	// keyed is a keyed poller's state of the shard (nil for a batch
	// poller).
	keyed *keyedShard
}

// devStreamRetryFor is how long `idemkit dev`'s pollers retry a failing
// record unless STREAM_RETRY_SECONDS says otherwise.
const devStreamRetryFor = 15 * time.Minute

func (p *poller) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *poller) wait(ctx context.Context, d time.Duration) {
	if p.sleep != nil {
		p.sleep(ctx, d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (p *poller) run(ctx context.Context) {
	shards := map[string]*shardState{}
	// A keyed poller's handlers run on goroutines of their own: the
	// poller returns once they have stopped (a record ctx interrupted
	// stays undone, before the checkpoint), and their progress (a shard
	// whose records all ended, a full window with room again) ends an
	// idle wait.
	var progress chan struct{}
	if p.parallel > 0 {
		progress = make(chan struct{}, 1)
		defer func() {
			for _, st := range shards {
				if st.keyed != nil {
					st.keyed.wg.Wait()
				}
			}
		}()
	}
	var lastDescribe, lastBusy time.Time
	idle := p.interval
	idleMax := p.idleMax
	if idleMax <= 0 {
		idleMax = devIdlePoll
	}
	for ctx.Err() == nil {
		every := 2 * time.Second
		if time.Since(lastBusy) > devIdleDescribe {
			every = devIdleDescribe
		}
		if time.Since(lastDescribe) > every {
			lastDescribe = time.Now()
			if err := p.discover(ctx, shards, progress); err != nil && ctx.Err() == nil {
				p.log.Warn("dev: describe stream", slog.String("stream", p.name), slog.String("error", err.Error()))
			}
		}
		busy := false
		for id, st := range shards {
			if ctx.Err() != nil {
				return
			}
			if st.done {
				continue
			}
			if p.step(ctx, id, st) {
				busy = true
			}
			if st.done {
				lastDescribe = time.Time{} // a closed shard: look for its successor now
			}
		}
		if busy {
			idle, lastBusy = p.interval, time.Now()
			if !p.pause(ctx, shards) {
				return
			}
			continue
		}
		// Idle: back off to at most idleMax between polls, so idle streams
		// cost the emulator about one request per stream per idleMax; a
		// wake-up (a write of the stack to this table, a resume pass that
		// executed runs) polls after the gathering pause.
		t := time.NewTimer(idle)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			idle = min(2*idle, idleMax)
		case <-p.wake:
			t.Stop()
			idle = p.interval
			if !p.pause(ctx, shards) {
				return
			}
		case <-progress:
			t.Stop()
			idle = p.interval
		}
	}
}

// devPollGather is how long a poller lets records gather after a wake-up
// or a handled batch before it polls again: under load the stack writes
// all the time, and without the pause each poll returned about one record
// (0.9 GetRecords and 0.3 checkpoint writes per run at 32 clients on
// DynamoDB Local); with it the records written meanwhile come in one
// GetRecords and one batch (0.35-0.45 and 0.13; docs/performance-history.md). It
// delays a run's start by at most this much.
//
// devAuditGather is the pause of the pollers that feed only the auditor
// (the idempotency and effects streams), whose records start nothing:
// 250 ms, the rate at which Lambda's event source mapping polls a shard
// (four times a second), so dev reads those streams no more often than
// the deployed auditor's mappings do.
const (
	devPollGather  = 50 * time.Millisecond
	devAuditGather = 250 * time.Millisecond
)

// pause waits the poller's gathering pause (a keyed poller whose handlers
// are running: devKeyedBusyGather); false when ctx ended first.
func (p *poller) pause(ctx context.Context, shards map[string]*shardState) bool {
	d := p.gather
	if d <= 0 {
		d = devPollGather
	}
	for _, st := range shards {
		if st.keyed != nil && !st.keyed.idle() {
			d = max(d, devKeyedBusyGather)
			break
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (p *poller) discover(ctx context.Context, shards map[string]*shardState, progress chan<- struct{}) error {
	var start *string
	for {
		out, err := p.sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.arn), ExclusiveStartShardId: start})
		if err != nil {
			return err
		}
		for _, s := range out.StreamDescription.Shards {
			if s.ShardId == nil || shards[*s.ShardId] != nil {
				continue
			}
			st := &shardState{needIter: true}
			if p.parallel > 0 {
				st.keyed = newKeyedShard(p.parallel, progress)
			}
			if p.cp != nil {
				seq, err := p.cp.get(ctx, p.arn, *s.ShardId)
				if err != nil {
					return err
				}
				st.checkpoint = seq
			}
			if err := p.acquire(ctx, *s.ShardId, st); err != nil {
				return err
			}
			shards[*s.ShardId] = st
		}
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return nil
		}
		start = out.StreamDescription.LastEvaluatedShardId
	}
}

// acquire gets st a shard iterator after its checkpoint, or at
// TRIM_HORIZON without one.
func (p *poller) acquire(ctx context.Context, id string, st *shardState) error {
	return p.acquireAfter(ctx, id, st, st.checkpoint)
}

// acquireAfter gets st a shard iterator after the sequence number seq, or
// at TRIM_HORIZON for "".
func (p *poller) acquireAfter(ctx context.Context, id string, st *shardState, seq string) error {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.arn), ShardId: aws.String(id), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon}
	if seq != "" {
		in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(seq)
	}
	it, err := p.sc.GetShardIterator(ctx, in)
	if err != nil {
		return err
	}
	st.iter, st.needIter = it.ShardIterator, false
	return nil
}

// handled records that everything up to st.batchEnd is handled.
func (p *poller) handled(ctx context.Context, id string, st *shardState) {
	st.pending, st.retries, st.failing = nil, 0, ""
	if st.batchEnd == "" || st.batchEnd == st.checkpoint {
		return
	}
	st.checkpoint = st.batchEnd
	if p.cp != nil {
		if err := p.cp.put(ctx, p.arn, id, st.checkpoint); err != nil && ctx.Err() == nil {
			// Not fatal: a restart re-reads from the previous
			// checkpoint, and every handler is idempotent.
			p.log.Warn("dev: stream checkpoint", slog.String("stream", p.name), slog.String("shard", id), slog.String("error", err.Error()))
		}
	}
}

// step processes one batch of a shard; it reports whether there was work.
func (p *poller) step(ctx context.Context, id string, st *shardState) bool {
	if st.keyed != nil {
		return p.stepKeyed(ctx, id, st)
	}
	if len(st.pending) == 0 {
		if st.needIter {
			if err := p.acquire(ctx, id, st); err != nil {
				if ctx.Err() == nil {
					p.log.Warn("dev: get shard iterator", slog.String("stream", p.name), slog.String("shard", id), slog.String("error", err.Error()))
				}
				return false
			}
		}
		if st.iter == nil {
			st.done = true
			return false
		}
		out, err := p.sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: st.iter, Limit: aws.Int32(100)})
		if err != nil {
			var trimmed *streamtypes.TrimmedDataAccessException
			var expired *streamtypes.ExpiredIteratorException
			if errors.As(err, &trimmed) || errors.As(err, &expired) {
				// DynamoDB Local answers TrimmedDataAccessException to
				// an iterator taken at TRIM_HORIZON of a shard that was
				// empty then; iterators also expire after 15 minutes.
				// Start again from the checkpoint.
				st.needIter = true
				return false
			}
			if ctx.Err() == nil {
				p.log.Warn("dev: get records", slog.String("stream", p.name), slog.String("shard", id), slog.String("error", err.Error()))
				// The engine may have restarted and forgotten the
				// iterator: take a new one at the checkpoint (nothing
				// is pending, so the checkpoint is where reading
				// stands).
				st.needIter = true
			}
			return false
		}
		st.iter = out.NextShardIterator
		for _, r := range out.Records {
			if r.Dynamodb != nil && r.Dynamodb.SequenceNumber != nil {
				st.batchEnd = *r.Dynamodb.SequenceNumber
			}
			sr, err := stream.FromStreams(r)
			if err != nil {
				p.log.Error("dev: undecodable stream record", slog.String("stream", p.name), slog.String("error", err.Error()))
				continue
			}
			if p.filter == nil || p.filter(sr) {
				st.pending = append(st.pending, sr)
			}
		}
		st.retries, st.failing = 0, ""
		if len(st.pending) == 0 {
			p.handled(ctx, id, st)
			return false
		}
	}
	retry := p.handle(ctx, st.pending)
	if len(retry) == 0 {
		p.handled(ctx, id, st)
		return true
	}
	first := retry[0]
	for i, r := range st.pending {
		if r.EventID == first {
			st.pending = st.pending[i:]
			break
		}
	}
	if st.failing != first {
		// A new head of the failing tail: its retry time starts now.
		st.failing, st.failingSince, st.retries = first, p.clock(), 0
	}
	st.retries++
	if failing := p.clock().Sub(st.failingSince); failing >= p.retryTime() {
		// Only the record that kept failing is dropped: the records
		// behind it, never tried meanwhile, are handed over next.
		p.log.Error("dev: stream record still failing after the retry time; sent to the on-failure destination",
			slog.String("stream", p.name), slog.String("event_id", first), slog.Int("tries", st.retries), slog.Int64("failing_for_ms", failing.Milliseconds()))
		st.pending, st.retries, st.failing = st.pending[1:], 0, ""
		if len(st.pending) == 0 {
			p.handled(ctx, id, st)
		}
		return true
	}
	p.wait(ctx, p.backoff(st.retries))
	return true
}

// retryTime is how long a failing record is retried before it is dropped.
func (p *poller) retryTime() time.Duration {
	if p.retryFor <= 0 {
		return devStreamRetryFor
	}
	return p.retryFor
}

// backoff is the wait before the try after the tries-th failure: doubling
// from 200 ms, at most backoffMax (0: 5 s).
func (p *poller) backoff(tries int) time.Duration {
	backoffMax := p.backoffMax
	if backoffMax <= 0 {
		backoffMax = 5 * time.Second
	}
	return min(time.Duration(1<<min(tries, 10))*100*time.Millisecond, backoffMax)
}
