package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/idemkit/idemkit/functions/host"
)

// batchFunc handles a batch and returns the event ids to retry (the first
// failed record and everything after it), like a Lambda partial batch
// response.
type batchFunc func(ctx context.Context, recs []host.StreamRecord) (retry []string)

// poller drives a handler from a table's stream the way a Lambda event
// source mapping does: per shard, in order, from TRIM_HORIZON; a failed
// batch tail is retried with backoff up to maxRetries times and then dropped
// (logged as sent to the on-failure destination).
type poller struct {
	name       string
	sc         *dynamodbstreams.Client
	arn        string
	handle     batchFunc
	log        *slog.Logger
	interval   time.Duration
	maxRetries int
	filter     func(host.StreamRecord) bool
}

type shardState struct {
	iter    *string
	pending []host.StreamRecord
	retries int
	done    bool
}

func (p *poller) run(ctx context.Context) {
	shards := map[string]*shardState{}
	var lastDescribe time.Time
	idle := p.interval
	for ctx.Err() == nil {
		if time.Since(lastDescribe) > 2*time.Second {
			lastDescribe = time.Now()
			if err := p.discover(ctx, shards); err != nil && ctx.Err() == nil {
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
		}
		if busy {
			idle = p.interval
			continue
		}
		// Idle: back off to at most a second between polls, so three idle
		// streams cost the emulator a few requests per second.
		select {
		case <-ctx.Done():
			return
		case <-time.After(idle):
		}
		idle = min(2*idle, time.Second)
	}
}

func (p *poller) discover(ctx context.Context, shards map[string]*shardState) error {
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
			it, err := p.sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
				StreamArn: aws.String(p.arn), ShardId: s.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				return err
			}
			shards[*s.ShardId] = &shardState{iter: it.ShardIterator}
		}
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return nil
		}
		start = out.StreamDescription.LastEvaluatedShardId
	}
}

// step processes one batch of a shard; it reports whether there was work.
func (p *poller) step(ctx context.Context, id string, st *shardState) bool {
	if len(st.pending) == 0 {
		if st.iter == nil {
			st.done = true
			return false
		}
		out, err := p.sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: st.iter, Limit: aws.Int32(100)})
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("dev: get records", slog.String("stream", p.name), slog.String("shard", id), slog.String("error", err.Error()))
			}
			return false
		}
		st.iter = out.NextShardIterator
		for _, r := range out.Records {
			sr, err := host.FromStreams(r)
			if err != nil {
				p.log.Error("dev: undecodable stream record", slog.String("stream", p.name), slog.String("error", err.Error()))
				continue
			}
			if p.filter == nil || p.filter(sr) {
				st.pending = append(st.pending, sr)
			}
		}
		st.retries = 0
		if len(st.pending) == 0 {
			return false
		}
	}
	retry := p.handle(ctx, st.pending)
	if len(retry) == 0 {
		st.pending = nil
		return true
	}
	first := retry[0]
	for i, r := range st.pending {
		if r.EventID == first {
			st.pending = st.pending[i:]
			break
		}
	}
	st.retries++
	if st.retries > p.maxRetries {
		p.log.Error("dev: stream batch failed after retries; sent to the on-failure destination",
			slog.String("stream", p.name), slog.Int("records", len(st.pending)))
		st.pending, st.retries = nil, 0
		return true
	}
	backoff := min(time.Duration(1<<min(st.retries, 6))*100*time.Millisecond, 5*time.Second)
	select {
	case <-ctx.Done():
	case <-time.After(backoff):
	}
	return true
}
