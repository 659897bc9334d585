package kit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/keyhash"
)

// chunksArriveWithin is how long after a completion a reconciled-records
// api function takes a missing chunk item of the response for one still
// replicating: far beyond the replication lag the stack alarms on
// (ReplicationLagBoundMs, at most a minute), far short of any retention
// (24 h at least).
const chunksArriveWithin = 5 * time.Minute

// MetricChunksReplicating counts the replays under reconciled-records
// answered 503 idemkit.store_unavailable because the record's response
// chunks had not replicated yet (replicatingChunks). No dimensions. Each
// is counted in idem.MetricStoreUnavailable too (the Guard counts every
// such 503); the store-unavailable alarm reads the difference, so that a
// replica's replication lag does not page as a store outage.
const MetricChunksReplicating = "idemkit.idempotency.chunks_replicating_total"

// Layer1Store is the api function's Layer-1 store: the table on client
// and, under reconciled-records, a replay that reads a record whose
// response's chunk items have not arrived yet answered as the store
// unavailable (replicatingChunks), counted in metrics
// (MetricChunksReplicating; nil counts nothing). retention is the records'
// retention (idemenv.Env.EffectiveRetention).
func Layer1Store(client idemdynamo.API, table, crossRegion string, retention time.Duration, metrics *emf.Recorder) (idem.Store, error) {
	st, err := idemdynamo.New(idemdynamo.Config{Client: client, Table: table})
	if err != nil || crossRegion != settings.CrossRegionReconciled {
		return st, err
	}
	return replicatingChunks{Store: st, retention: retention, metrics: metrics}, nil
}

// replicatingChunks is the Layer-1 store under reconciled-records, where
// each region decides its keys on its own replica of the global table,
// which replicates items independently: a record whose response is kept
// in chunk items beside it (larger than the record keeps inline) can
// reach a replica before its chunks. The store reads a missing chunk as
// the response lost (idem.ErrNotKept: 410 idemkit.response_not_kept,
// final, never retried by a client), true in one region; here a replay
// that finds the chunks missing within chunksArriveWithin of the
// record's completion (its retention end less the retention) is
// idem.ErrStoreUnavailable instead: 503 idemkit.store_unavailable with
// Retry-After, the handler not run, and the retry replays the response
// once the chunks have arrived; each counted in MetricChunksReplicating.
// Later, or for a record that never expires (no completion time to judge
// by), the chunk is lost, as in one region. The record carries no
// completion time, so it is judged with the retention this function runs
// with: a record written before a redeploy that changed the retention
// looks completed that change earlier or later. A judged completion more
// than chunksArriveWithin ahead of now is no completion at all (the other
// region's clock runs ahead by seconds, not minutes) but a retention
// shortened since, and the chunk is lost: 410, not 503 until the judged
// completion passes (days). What is misjudged is only a record completed
// within chunksArriveWithin before such a redeploy whose chunks are still
// replicating: answered lost (410) when the retention changed by more than
// chunksArriveWithin (a smaller change only shifts the five minutes).
type replicatingChunks struct {
	idem.Store
	retention time.Duration
	metrics   *emf.Recorder
}

func (s replicatingChunks) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, rec, now)
	if rerr := s.replicating(res.Record, now, err); rerr != nil {
		s.metrics.Count(MetricChunksReplicating, 1, nil)
		return idem.ClaimResult{}, rerr
	}
	return res, err
}

// Get is the store's Get with a final record read before its chunks
// arrived judged as Claim judges it: the store unavailable within
// chunksArriveWithin of its completion, so that a duplicate waiting in
// this region for a request completed in another polls on (and replays
// the response once the chunks are there) rather than ends its wait with
// the response lost (410, final: RED_TEAM 341). Not counted in
// MetricChunksReplicating: a failed poll answers no 503, and the metric is
// subtracted from the 503s answered.
func (s replicatingChunks) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	rec, found, err := s.Store.Get(ctx, id, now)
	if rerr := s.replicating(rec, now, err); rerr != nil {
		return idem.Record{}, false, rerr
	}
	return rec, found, err
}

// replicating returns the store unavailable error for err, a read of the
// final record rec that found a chunk item of its response missing
// (idem.ErrNotKept), when rec was completed within chunksArriveWithin of
// now (judged as its retention end less the retention); nil otherwise.
func (s replicatingChunks) replicating(rec idem.Record, now time.Time, err error) error {
	if !errors.Is(err, idem.ErrNotKept) || !rec.State.Final() || rec.Expires.IsZero() || s.retention <= 0 {
		return nil
	}
	completed := rec.Expires.Add(-s.retention)
	if age := now.Sub(completed); age >= chunksArriveWithin || age <= -chunksArriveWithin {
		return nil
	}
	return fmt.Errorf("%w: record %s: its response's chunk items have not replicated yet (completed %s ago; the store read: %v)",
		idem.ErrStoreUnavailable, keyhash.Log(rec.ID), now.Sub(completed).Round(time.Millisecond), err)
}
