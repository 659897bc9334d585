package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"time"
)

// The attributes a pause and a resume write.
const (
	runAttrPausedBy  = "pausedBy"     // S: Run.PausedBy
	runAttrResumedBy = "resumedBy"    // S: Run.ResumedBy
	runAttrPausePend = "pausePending" // S: Run.PausePending, a LogEvent's JSON
)

// pauseTries bounds the compare-and-sets of one Pause or Unpause: each
// one refused because the run moved between its read and its write (a
// node event appended, a heartbeat) reads it again.
const pauseTries = 8

// pauseFromItem reads the attributes of a pause and a resume into r.
func pauseFromItem(m map[string]types.AttributeValue, r *Run) {
	if v, ok := m[runAttrPausedBy].(*types.AttributeValueMemberS); ok {
		r.PausedBy = v.Value
	}
	if v, ok := m[runAttrResumedBy].(*types.AttributeValueMemberS); ok {
		r.ResumedBy = v.Value
	}
	if v, ok := m[runAttrPausePend].(*types.AttributeValueMemberS); ok {
		var ev LogEvent
		if json.Unmarshal([]byte(v.Value), &ev) == nil {
			r.PausePending = &ev
		}
	}
}

// asRead is the condition that the run is still as r was read: its
// status, version, claim epoch, log length and held run.paused.
func asRead(r Run) expression.ConditionBuilder {
	at := expression.Name(runAttrLog).Size().Equal(expression.Value(len(r.Log)))
	if len(r.Log) == 0 {
		at = expression.AttributeNotExists(expression.Name(runAttrLog)).Or(at)
	}
	pend := expression.AttributeNotExists(expression.Name(runAttrPausePend))
	if r.PausePending != nil {
		pend = expression.AttributeExists(expression.Name(runAttrPausePend))
	}
	return expression.AttributeExists(expression.Name(runAttrPK)).
		And(expression.Name(runAttrStatus).Equal(expression.Value(string(r.Status)))).
		And(versionIs(r.Version)).And(epochIs(r.Epoch)).And(at).And(pend)
}

// appendTo is the update appending evs to the run's log.
func appendTo(upd expression.UpdateBuilder, evs []LogEvent) expression.UpdateBuilder {
	empty := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	return upd.Set(expression.Name(runAttrLog), expression.ListAppend(
		expression.IfNotExists(expression.Name(runAttrLog), expression.Value(empty)), expression.Value(logAV(evs))))
}

// Pause implements PauseStore: a consistent read, then one UpdateItem
// conditional on the run as read (asRead), read again and retried while
// the run moved in between and is still live (at most pauseTries times).
func (d *DynamoRuns) Pause(ctx context.Context, id string, p Pause, now time.Time) (Run, error) {
	return d.PauseGuarded(ctx, id, p, nil, now)
}

// PauseGuarded implements GuardedPauseStore: Pause with g checked on each
// read, the UpdateItem conditional on the run as g saw it (asRead: its
// version included), at no further round trip.
func (d *DynamoRuns) PauseGuarded(ctx context.Context, id string, p Pause, g Guard, now time.Time) (Run, error) {
	r, err := d.Get(ctx, id)
	if err != nil {
		return Run{}, err
	}
	for range pauseTries {
		if done, err := pauseDecided(r, p, g); done {
			return r, err
		}
		ev, pending, fence := planPause(r, p, now)
		upd := expression.Set(expression.Name(runAttrStatus), expression.Value(string(StatusPaused))).
			Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())).
			Remove(expression.Name(runAttrWake)).Remove(expression.Name(runAttrWakeAt)).
			Remove(expression.Name(runAttrWakeN)).Remove(expression.Name(runAttrWakeMax)).Remove(expression.Name(runAttrWakeDL))
		if pending {
			// Held while the node drains: the run stays in the byLive
			// index, so the stale-run pass finds it should its execution
			// stop renewing (ReleaseStalePause).
			b, err := json.Marshal(tableTimes([]LogEvent{ev})[0])
			if err != nil {
				return Run{}, err
			}
			upd = upd.Set(expression.Name(runAttrPausePend), expression.Value(string(b)))
		} else {
			upd = appendTo(upd, []LogEvent{ev}).Remove(expression.Name(runAttrLive))
		}
		if fence {
			upd = upd.Add(expression.Name(runAttrEpoch), expression.Value(1))
		}
		if p.By != "" {
			upd = upd.Set(expression.Name(runAttrPausedBy), expression.Value(p.By))
		}
		upd = newVersion(upd, pauseVersion(r))
		got, err := d.updateRun(ctx, id, asRead(r), upd, "pause run")
		if !errors.Is(err, ErrStatusConflict) {
			return got, err
		}
		r = got
	}
	return Run{}, fmt.Errorf("host: pause run: the run moved on each of %d tries", pauseTries)
}

// Unpause implements PauseStore: a consistent read, then one UpdateItem
// conditional on the run as read (asRead), read again and retried while
// the run moved in between and is still paused (at most pauseTries times).
func (d *DynamoRuns) Unpause(ctx context.Context, id, by, reason string, now time.Time) (Run, error) {
	return d.UnpauseGuarded(ctx, id, by, reason, nil, now)
}

// UnpauseGuarded implements GuardedPauseStore: Unpause with g checked on
// each read, the UpdateItem conditional on the run as g saw it (asRead),
// at no further round trip.
func (d *DynamoRuns) UnpauseGuarded(ctx context.Context, id, by, reason string, g Guard, now time.Time) (Run, error) {
	r, err := d.Get(ctx, id)
	if err != nil {
		return Run{}, err
	}
	for range pauseTries {
		if done, err := resumeDecided(r, by, g); done {
			return r, err
		}
		upd := expression.Set(expression.Name(runAttrStatus), expression.Value(string(StatusRunning))).
			Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())).
			Set(expression.Name(runAttrLive), expression.Value(liveShardOf(id))).
			Remove(expression.Name(runAttrPausePend)).
			Add(expression.Name(runAttrEpoch), expression.Value(1))
		upd = appendTo(upd, resumeEvents(r, reason, now))
		if by != "" {
			upd = upd.Set(expression.Name(runAttrResumedBy), expression.Value(by))
		}
		upd = newVersion(upd, version(FieldStatus, StatusRunning))
		got, err := d.updateRun(ctx, id, asRead(r), upd, "resume run")
		if !errors.Is(err, ErrStatusConflict) {
			return got, err
		}
		r = got
	}
	return Run{}, fmt.Errorf("host: resume run: the run moved on each of %d tries", pauseTries)
}

// appendDrained is AppendLog of evs, the end of the node a pause lets
// drain (cur, as the refused append found the run, holds its run.paused):
// one UpdateItem appending evs and that event, removing it from the run,
// conditional on the run still paused with it held, under f.
func (d *DynamoRuns) appendDrained(ctx context.Context, id string, cur Run, f Fence, evs []LogEvent, now time.Time) (Run, error) {
	at := expression.Name(runAttrLog).Size().Equal(expression.Value(f.At))
	if f.At == 0 {
		at = expression.AttributeNotExists(expression.Name(runAttrLog)).Or(at)
	}
	cond := expression.AttributeExists(expression.Name(runAttrPK)).
		And(expression.Name(runAttrStatus).Equal(expression.Value(string(StatusPaused)))).
		And(expression.AttributeExists(expression.Name(runAttrPausePend))).
		And(epochIs(f.Epoch)).And(at)
	all := append(append([]LogEvent{}, evs...), drained(*cur.PausePending, evs, now))
	upd := appendTo(expression.Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())), all).
		Remove(expression.Name(runAttrPausePend)).Remove(expression.Name(runAttrLive))
	return d.updateRun(ctx, id, cond, upd, "append drained node")
}

// releasePause is a park's refusal of cur, paused while its execution
// (epoch) drained its node: that execution parks the run instead, so its
// held run.paused is appended now (one UpdateItem conditional on the run
// still paused holding it under epoch, on this failure path only), and
// the park is still refused (RED_TEAM 377). A failure of that write
// leaves the event held, as before, and is still ErrStatusConflict.
func (d *DynamoRuns) releasePause(ctx context.Context, id string, cur Run, epoch int64, now time.Time) (Run, error) {
	cond := expression.AttributeExists(expression.Name(runAttrPK)).
		And(expression.Name(runAttrStatus).Equal(expression.Value(string(StatusPaused)))).
		And(expression.AttributeExists(expression.Name(runAttrPausePend))).And(epochIs(epoch))
	upd := appendTo(expression.Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())),
		[]LogEvent{drained(*cur.PausePending, nil, now)}).Remove(expression.Name(runAttrPausePend)).Remove(expression.Name(runAttrLive))
	got, err := d.updateRun(ctx, id, cond, upd, "record held run.paused")
	switch {
	case err == nil:
		return got, ErrStatusConflict
	case errors.Is(err, ErrStatusConflict):
		return got, err
	}
	return cur, fmt.Errorf("%w (its held run.paused stays held: %v)", ErrStatusConflict, err)
}

// ReleaseStalePause implements PauseStore: one UpdateItem appending r's
// held run.paused (the event as the pass read it: a run paused under
// r.Epoch still holding one holds that one, since only a resume, which
// moves the epoch on, leaves paused) and removing it and the run's
// liveShard (the byLive index drops it), conditional on the run paused,
// holding it, under r.Epoch, with updatedAt <= before.
func (d *DynamoRuns) ReleaseStalePause(ctx context.Context, r Run, before, now time.Time) (Run, error) {
	if r.PausePending == nil {
		cur, err := d.Get(ctx, r.ID)
		if err != nil {
			return cur, err
		}
		return cur, ErrStatusConflict // not read holding one: nothing to release
	}
	cond := expression.AttributeExists(expression.Name(runAttrPK)).
		And(expression.Name(runAttrStatus).Equal(expression.Value(string(StatusPaused)))).
		And(expression.AttributeExists(expression.Name(runAttrPausePend))).And(epochIs(r.Epoch)).
		And(expression.Name(runAttrUpdated).LessThanEqual(expression.Value(before.UnixMilli())))
	upd := appendTo(expression.Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())),
		[]LogEvent{drained(*r.PausePending, nil, now)}).Remove(expression.Name(runAttrPausePend)).Remove(expression.Name(runAttrLive))
	return d.updateRun(ctx, r.ID, cond, upd, "release stale run.paused")
}

// renewableRun is the condition of a claim's renewal: a live run, or a
// paused one whose run.paused waits for the node its execution drains.
func renewableRun() expression.ConditionBuilder {
	paused := expression.Name(runAttrStatus).Equal(expression.Value(string(StatusPaused))).
		And(expression.AttributeExists(expression.Name(runAttrPausePend)))
	live := expression.Name(runAttrStatus).In(expression.Value(string(StatusPending)), expression.Value(string(StatusRunning)))
	return expression.AttributeExists(expression.Name(runAttrPK)).And(expression.Or(live, paused))
}
