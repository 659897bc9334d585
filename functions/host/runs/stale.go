package runs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Stale runs: a run whose creation was acknowledged is driven by the runs
// stream, but a delivery can be lost (a poller or event source mapping that
// gave up during a store outage, a crash between reading and handling).
// Every live run therefore stays findable by its last progress: the sparse
// byLive index of RunsTable holds exactly the pending and running runs
// that are not parked (liveShard is written by Create and Resume, and
// removed by Schedule, Park and every terminal Transition; a parked run is
// found by Due), sorted by updatedAt, which every write of the run's
// progress moves (Transition, NoteFailure, Claim, Renew). A pass over
// it (execfn.Executor.ResumeStale) finds the runs without progress for
// longer than a bound and claims each with a compare-and-set on updatedAt
// (Claim) before executing it, so two resumers never both take a run, and
// every status change stays the executor's compare-and-set; a node that
// runs again meanwhile gets its effect's recorded outcome from the ledger.
//
// A paused run whose run.paused is held for the node its execution drains
// (PauseStore.Pause under DrainCurrentNode) keeps its liveShard, and its
// updatedAt moves with that execution's renewals: should the execution
// stop mid-node, the pass finds it too, and records the held event
// (PauseStore.ReleaseStalePause) instead of claiming it; the node's end,
// a park, that release, a resume or a cancel take it out again.
//
// Runs stored before the index existed carry no liveShard and are not
// found; nor are runs paused while draining before paused runs kept it.

// indexByLive is the RunsTable GSI serving Stale: partition liveShard
// (liveShards values "live#0".., present only on live runs that are not
// parked and on paused runs holding their run.paused for a draining
// node), sort updatedAt.
const indexByLive = "byLive"

// liveShards spreads the live runs over this many index partitions (one
// Query each per pass), so a busy table's creates do not all land on one.
const liveShards = 4

// liveShardOf is the byLive partition of run id.
func liveShardOf(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return "live#" + strconv.Itoa(int(h.Sum32()%liveShards))
}

// Stale implements RunStore.
func (m *MemRuns) Stale(_ context.Context, before time.Time, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var stale []Run
	for _, r := range m.runs {
		if (live(r.Status) && r.Wake.IsZero() || drainHeld(r)) && !r.UpdatedAt.After(before) {
			stale = append(stale, r)
		}
	}
	sort.Slice(stale, func(i, j int) bool { return stale[i].UpdatedAt.Before(stale[j].UpdatedAt) })
	ids := make([]string, 0, len(stale))
	for _, r := range stale {
		if limit > 0 && len(ids) >= limit {
			break
		}
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// Claim implements RunStore.
func (m *MemRuns) Claim(_ context.Context, id string, before, now time.Time) (Run, error) {
	return m.takeOver(id, now, func(r Run) bool {
		return !live(r.Status) || !r.Wake.IsZero() || r.UpdatedAt.After(before)
	})
}

// Adopt implements RunStore.
func (m *MemRuns) Adopt(_ context.Context, id string, now time.Time) (Run, error) {
	return m.takeOver(id, now, func(r Run) bool { return !live(r.Status) })
}

// takeOver is Claim and Adopt: unless refused(r) (ErrStatusConflict with
// the run), run id is stamped now and its epoch bumped, in one step under
// the lock.
func (m *MemRuns) takeOver(id string, now time.Time, refused func(Run) bool) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if refused(r) {
		return r, ErrStatusConflict
	}
	r.UpdatedAt = tableTime(now)
	r.Epoch++
	m.runs[id] = r
	return r, nil
}

// Resume implements RunStore.
func (m *MemRuns) Resume(_ context.Context, id string, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if !live(r.Status) || r.Wake.IsZero() || r.Wake.At.After(now) {
		return r, ErrStatusConflict
	}
	r.Wake, r.UpdatedAt = Wake{}, tableTime(now)
	r.Epoch++
	r.History = appendVersion(r.History, version(fieldWake, nil))
	r.Version = r.History.Current()
	m.runs[id] = r
	return r, nil
}

// Renew implements RunStore.
func (m *MemRuns) Renew(_ context.Context, id string, epoch int64, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if !renewable(r) || r.Epoch != epoch {
		return r, ErrStatusConflict
	}
	r.UpdatedAt = tableTime(now)
	m.runs[id] = r
	return r, nil
}

// Stale implements RunStore: one Query of the byLive index per shard
// (liveShard = s AND updatedAt <= before), oldest first within a shard.
// Client must also implement QueryAPI (a *dynamodb.Client does).
func (d *DynamoRuns) Stale(ctx context.Context, before time.Time, limit int) ([]string, error) {
	q, ok := d.Client.(QueryAPI)
	if !ok {
		return nil, errors.New("host: the runs client cannot Query")
	}
	var ids []string
	for s := 0; s < liveShards && (limit <= 0 || len(ids) < limit); s++ {
		kc := expression.Key(runAttrLive).Equal(expression.Value("live#" + strconv.Itoa(s))).
			And(expression.Key(runAttrUpdated).LessThanEqual(expression.Value(before.UnixMilli())))
		expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, err
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(d.Table), IndexName: aws.String(indexByLive),
			KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(),
			ExpressionAttributeValues: expr.Values(),
		}
		if limit > 0 {
			in.Limit = aws.Int32(int32(limit - len(ids)))
		}
		out, err := q.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("host: stale runs: %w", err)
		}
		for _, it := range out.Items {
			if v, ok := it[runAttrPK].(*types.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
	}
	return ids, nil
}

// Claim implements RunStore: one UpdateItem (SET updatedAt, ADD
// claimEpoch 1) conditional on the run existing, being pending or running,
// not parked (no wakeShard) and updatedAt <= before. It changes no tracked
// field, so the run's version stays.
func (d *DynamoRuns) Claim(ctx context.Context, id string, before, now time.Time) (Run, error) {
	cond := liveRun().
		And(expression.AttributeNotExists(expression.Name(runAttrWake))).
		And(expression.Name(runAttrUpdated).LessThanEqual(expression.Value(before.UnixMilli())))
	upd := expression.Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())).
		Add(expression.Name(runAttrEpoch), expression.Value(1))
	return d.updateRun(ctx, id, cond, upd, "claim stale run")
}

// Adopt implements RunStore: one UpdateItem (SET updatedAt, ADD
// claimEpoch 1) conditional on the run existing and being live.
func (d *DynamoRuns) Adopt(ctx context.Context, id string, now time.Time) (Run, error) {
	upd := expression.Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())).
		Add(expression.Name(runAttrEpoch), expression.Value(1))
	return d.updateRun(ctx, id, liveRun(), upd, "adopt run")
}

// Resume implements RunStore: one UpdateItem (REMOVE the wake attributes,
// wakeShard among them, so the byWake index drops the run; SET liveShard,
// so the byLive index lists it again, and updatedAt; ADD claimEpoch 1; a
// new version) conditional on the run existing, being live, parked and
// due (wakeAt <= now).
func (d *DynamoRuns) Resume(ctx context.Context, id string, now time.Time) (Run, error) {
	cond := liveRun().
		And(expression.AttributeExists(expression.Name(runAttrWake))).
		And(expression.Name(runAttrWakeAt).LessThanEqual(expression.Value(now.UnixMilli())))
	upd := expression.Remove(expression.Name(runAttrWake)).Remove(expression.Name(runAttrWakeAt)).
		Remove(expression.Name(runAttrWakeN)).Remove(expression.Name(runAttrWakeMax)).Remove(expression.Name(runAttrWakeDL)).
		Set(expression.Name(runAttrLive), expression.Value(liveShardOf(id))).
		Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())).
		Add(expression.Name(runAttrEpoch), expression.Value(1))
	upd = newVersion(upd, version(fieldWake, nil))
	return d.updateRun(ctx, id, cond, upd, "resume parked run")
}

// Renew implements RunStore: one UpdateItem (SET updatedAt) conditional on
// the run existing, being live (or paused with its run.paused held for the
// node its execution drains: renewableRun) and its claimEpoch being epoch.
func (d *DynamoRuns) Renew(ctx context.Context, id string, epoch int64, now time.Time) (Run, error) {
	upd := expression.Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli()))
	return d.updateRun(ctx, id, renewableRun().And(epochIs(epoch)), upd, "renew run claim")
}

// liveRun is the condition that the run exists and is pending or running.
func liveRun() expression.ConditionBuilder {
	live := expression.Name(runAttrStatus).In(expression.Value(string(StatusPending)), expression.Value(string(StatusRunning)))
	return expression.AttributeExists(expression.Name(runAttrPK)).And(live)
}

// epochIs is the condition that the run's claim epoch is epoch (a run
// never taken has none, which reads as 0).
func epochIs(epoch int64) expression.ConditionBuilder {
	is := expression.Name(runAttrEpoch).Equal(expression.Value(epoch))
	if epoch == 0 {
		return expression.AttributeNotExists(expression.Name(runAttrEpoch)).Or(is)
	}
	return is
}
