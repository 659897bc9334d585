package auditfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
)

// KeyRestorer writes a Layer-1 conflict's winner back into this region's
// replica of the idempotency table (see conflictaudit.KeyConflict): winner
// is the record's image naming the lower run (or, held, a run while the
// other region's claim names none yet), loser the image the replica held
// when the change was read (the other region's record or pending claim).
// It writes only while the replica still holds the loser as seen (its
// request id, owner token and state); otherwise written is false and
// current is the item the replica holds (nil when none or not known), for
// the caller to decide on: a held claim may have completed since, and a
// change delivered again after the records converged must write nothing.
// A nil loser writes only where the replica holds no item of the record
// (the other region's claim was deleted: see Auditor.idempotency).
type KeyRestorer interface {
	Restore(ctx context.Context, winner, loser map[string]types.AttributeValue) (written bool, current map[string]types.AttributeValue, err error)
}

// PutItemAPI is the DynamoDB operation TableRestorer uses.
type PutItemAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// TableRestorer is the KeyRestorer of one region's IdempotencyTable
// replica: one PutItem of the winner's image, conditional on the item
// still being the loser as seen (its requestId, owner and state), or on
// there being no item when loser is nil; a failed condition returns the
// item as the failed write found it (ALL_OLD). It
// needs dynamodb:PutItem on the table (the template grants it to the
// auditor under reconciled-records only).
type TableRestorer struct {
	// Client is the region's DynamoDB client. Required.
	Client PutItemAPI
	// Table is the IdempotencyTable name. Required.
	Table string
}

// The attributes of a Layer-1 record item the restore's condition names,
// named once here (decoding goes through idemdynamo.DecodeItem).
const (
	attrPK        = "pk"
	attrRequestID = "requestId"
	attrOwner     = "owner"
	attrState     = "state"
	// attrRestoredOver marks a record the auditor wrote back over the
	// other region's record of a conflict it recorded: on a Layer-1
	// record the run of that record (the loser), on an effect record the
	// owner token of the claim written over. The write-back's own change
	// (in this region's stream, and in the other region's once it
	// replicates) shows the conflict again; marked so, it is not recorded
	// again. A hold's write-back records nothing (no rival run known) and
	// is marked "": no conflict matches it, but its change, from a pending
	// claim to a record of higher attempt, is no reclaim either. A Layer-1
	// record's next claim, after its retention, is a whole-item PutItem
	// and drops it; the mark is read only on the change that writes it.
	attrRestoredOver = "auditRestoredOver"
)

// marked returns a copy of winner marked as written back over the record
// naming loserRun, or over the claim of owner loserRun (attrRestoredOver);
// "" for a hold's write-back, over a claim naming no run yet.
func marked(winner map[string]types.AttributeValue, loserRun string) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(winner)+1)
	for k, v := range winner {
		out[k] = v
	}
	out[attrRestoredOver] = &types.AttributeValueMemberS{Value: loserRun}
	return out
}

// writtenBack reports whether newImage is an auditor's write-back (marked).
func writtenBack(newImage map[string]types.AttributeValue) bool {
	_, ok := newImage[attrRestoredOver]
	return ok
}

// restoreEcho reports whether a change whose new image wins a conflict
// over old is a write-back made over old's run (marked), whichever region
// wrote it: that region recorded the conflict when it wrote it.
func restoreEcho(newImage map[string]types.AttributeValue, old conflictaudit.KeyRecord) bool {
	v, ok := newImage[attrRestoredOver].(*types.AttributeValueMemberS)
	return ok && old.Run != "" && v.Value == old.Run
}

// Restore implements KeyRestorer.
func (r TableRestorer) Restore(ctx context.Context, winner, loser map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	c := expression.Name(attrPK).AttributeNotExists()
	if loser != nil {
		l, err := idemdynamo.DecodeItem(loser)
		if err != nil {
			return false, nil, nil
		}
		c = expression.Name(attrRequestID).Equal(expression.Value(l.RequestID)).
			And(expression.Name(attrOwner).Equal(expression.Value(l.Owner))).
			And(expression.Name(attrState).Equal(expression.Value(string(l.State))))
	}
	cond, err := expression.NewBuilder().WithCondition(c).Build()
	if err != nil {
		return false, nil, err
	}
	return putIf(ctx, r.Client, &dynamodb.PutItemInput{TableName: aws.String(r.Table), Item: winner,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()},
		"the Layer-1 record")
}

// putIf sends in, a conditional PutItem of a write-back, through client:
// written, or, its condition failing, not written and the item found
// instead (ReturnValuesOnConditionCheckFailure ALL_OLD); any other error
// wrapped, naming what (the record written back).
func putIf(ctx context.Context, client PutItemAPI, in *dynamodb.PutItemInput, what string) (bool, map[string]types.AttributeValue, error) {
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err := client.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, ccf.Item, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("auditfn: restore %s: %w", what, err)
	}
	return true, nil, nil
}

// keyRecord is a Layer-1 image as the conflict audit sees it: its run is
// the runId member of a stored 201 JSON answer (createRun's, retryRun's
// and forkRun's), "" for any other record.
func keyRecord(rec idem.Record, now time.Time) conflictaudit.KeyRecord {
	k := conflictaudit.KeyRecord{Record: rec.ID, RequestID: rec.RequestID, Expired: rec.Expired(now), Pending: rec.State == idem.StatePending}
	if r := rec.Response; r != nil && r.Status == http.StatusCreated {
		var body struct {
			RunID string `json:"runId"`
		}
		if json.Unmarshal(r.Body, &body) == nil {
			k.Run = body.RunID
		}
	}
	return k
}

// keyConflict audits one MODIFY of the idempotency table for a Layer-1
// conflict and, where this region holds the loser (or a rival claim whose
// run is not known yet: conflictaudit.HoldKey), restores the old image. A
// held claim that completed naming a run before the restore reached the
// replica (itself or a takeover of it in its region) is audited as the
// change from the old image to that completion: a conflict of two runs,
// restored only where the old image names the lower one; one that ended
// naming no run (released) is restored over, and so is a takeover still
// pending. So
// the restore never writes over a record that moved on (another claim, or
// the records converged: a change delivered again). It returns a restore
// error (the record is then delivered again).
func (a *Auditor) keyConflict(ctx context.Context, r stream.StreamRecord, c *Counts) error {
	oldRec, err1 := idemdynamo.DecodeItem(r.OldImage)
	curRec, err2 := idemdynamo.DecodeItem(r.NewImage)
	if err1 != nil || err2 != nil {
		return nil
	}
	now := a.now()
	// The old record's retention is judged at the new claim's own time
	// too (its lease write, on the clock of the request that claimed),
	// and at the change's (DynamoDB's, when it reached this table, after
	// the claim; an ended record keeps no lease write): a claim made
	// after that retention ended is a new key's, even when this
	// function's clock is behind.
	at := now
	if curRec.Renewed.After(at) {
		at = curRec.Renewed
	}
	if r.Created.After(at) {
		at = r.Created
	}
	old, cur := keyRecord(oldRec, at), keyRecord(curRec, now)
	// A conflict is recorded once every restore of this change is
	// decided: a restore that fails has the record delivered again, which
	// records them then. Recorded as each write was decided, a conflict
	// seen before a later write of the same change failed (the third
	// region's record, below) was recorded again on the redelivery
	// (RED_TEAM 439).
	var seen [][2]conflictaudit.KeyRecord
	record := func(o, n conflictaudit.KeyRecord) { seen = append(seen, [2]conflictaudit.KeyRecord{o, n}) }
	observe := func() {
		for _, p := range seen {
			if a.Conflicts.ObserveKey(p[0], p[1]) != nil {
				c.Conflicts++
			}
		}
	}
	kc := conflictaudit.DetectKey(old, cur)
	if kc != nil && !kc.Restore && restoreEcho(r.NewImage, old) {
		return nil // a write-back over old's run: recorded where it was written
	}
	if a.Restore == nil && kc != nil && kc.Restore {
		// Nothing is written back: the record keeps cur's run, and the
		// event says so (RED_TEAM 505).
		if a.Conflicts.ObserveKeyKept(old, cur) != nil {
			c.Conflicts++
		}
		return nil
	}
	if (kc == nil || !kc.Restore) && !conflictaudit.HoldKey(old, cur) || a.Restore == nil {
		record(old, cur)
		observe()
		return nil
	}
	written, current, err := a.Restore.Restore(ctx, marked(r.OldImage, cur.Run), r.NewImage)
	if err == nil {
		record(old, cur) // nothing when held (no run known yet)
	}
	var done idem.Record
	derr := errors.New("no item")
	if err == nil && !written && len(current) > 0 {
		done, derr = idemdynamo.DecodeItem(current)
	}
	sameClaim := derr == nil && done.RequestID == curRec.RequestID
	if derr == nil && !(sameClaim && conflictaudit.HoldKey(old, cur)) {
		// Another record replaced the one this change shows before the
		// restore: with three regions or more, a third region's record
		// (or claim) replicated here, or a write-back of it. The old
		// image is compared with that record as with the change's own
		// new image: written back over it where it names a higher run,
		// or none (held), the write conditional on it as found, and the
		// conflict recorded here (the write-back is marked over that
		// run); where it names a lower run, old's run lost to it here,
		// recorded unless that record is a write-back over old's run
		// (recorded where it was written): the lower run's region may
		// never see old's run, which replication discarded there.
		// Without this, the lowest run was lost for good where its
		// region's replica received two other regions' records before
		// its auditor read the first, and a run replaced here through a
		// claim was recorded nowhere (RED_TEAM 317).
		at2 := at
		if done.Renewed.After(at2) {
			at2 = done.Renewed
		}
		o2, dk := keyRecord(oldRec, at2), keyRecord(done, now)
		switch kc2 := conflictaudit.DetectKey(o2, dk); {
		case conflictaudit.HoldKey(o2, dk) || kc2 != nil && kc2.Restore:
			written, _, err = a.Restore.Restore(ctx, marked(r.OldImage, dk.Run), current)
			if err == nil && written {
				record(o2, dk)
			}
		case kc2 != nil && !restoreEcho(current, o2):
			record(o2, dk)
		}
	} else if sameClaim && conflictaudit.HoldKey(old, cur) {
		// The held claim may have moved on since, within its own
		// execution (its request id, which a takeover keeps): that is
		// what the replica holds. Taken over and still pending (its
		// lease ended in its region and a retry took it over under a
		// new owner), its run is still not known and it is held as the
		// claim was. Ended without a run (released, or an answer that
		// creates none), the old record is still the key's only run and
		// is restored over it as over the claim; ended naming a run
		// (the claim's own completion or its takeover's), the two runs
		// are now known and compared. Each write is conditional on the
		// item as the failed write found it.
		if done, derr := idemdynamo.DecodeItem(current); derr == nil && done.RequestID == curRec.RequestID &&
			(done.Owner != curRec.Owner || done.State != idem.StatePending) {
			dk := keyRecord(done, now)
			kc = conflictaudit.DetectKey(old, dk) // nil when dk names no run
			if dk.Run == "" || kc != nil && kc.Restore {
				written, _, err = a.Restore.Restore(ctx, marked(r.OldImage, dk.Run), current)
			}
			if err == nil {
				record(old, dk)
			}
		}
	} else if err == nil && !written && len(current) == 0 && conflictaudit.HoldKey(old, cur) {
		// The held claim is gone: deleted, its answer one the policy
		// forgets (the request leaves nothing behind), and the deletion
		// replicated here. The old record is the key's only run.
		written, _, err = a.Restore.Restore(ctx, marked(r.OldImage, ""), nil)
	}
	if err != nil {
		a.log().ErrorContext(ctx, "audit: restoring the Layer-1 conflict's winner failed", slog.String("record", a.ref(oldRec.ID)),
			slog.String("error", err.Error()))
		return err
	}
	observe()
	if written {
		c.Restored++
	}
	return nil
}

func (a *Auditor) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// keyDeleted audits a REMOVE of the idempotency table: under
// reconciled-records a record naming a run, within its retention, is
// deleted here only by a deletion of the other region replicated as the
// key's newest write: its claim of the key, deleted there because its
// answer is one the policy forgets (Forget: a 403, a 409
// run_already_active), or its TTL's deletion of the item it held, an
// older one of the key that expired there (TTL deletes are region-local,
// and replicate as the service principal's; TTL deletes no record within
// its retention, its TTL attribute being the retention end rounded up). The
// record is the key's only run, so it is written back where the replica
// holds no item, and replicates as the newest write.
// The key was free here from the deletion until now: a request of the key
// that claimed it anew meanwhile is held as a rival region's claim is
// (conflictaudit.HoldKey): written over while it names no run, compared
// once it names one (a conflict, written over only where the deleted
// record names the lower run), each write conditional on it as found. It
// returns a restore error (the record is then delivered again).
func (a *Auditor) keyDeleted(ctx context.Context, r stream.StreamRecord, c *Counts) error {
	if a.Restore == nil {
		return nil
	}
	rec, err := idemdynamo.DecodeItem(r.OldImage)
	if err != nil {
		return nil
	}
	now := a.now()
	// Its retention is judged at the deletion's time too (DynamoDB's
	// clock), whatever this function's clock.
	at := now
	if r.Created.After(at) {
		at = r.Created
	}
	old := keyRecord(rec, at)
	if old.Expired || old.Run == "" {
		return nil
	}
	written, current, err := a.Restore.Restore(ctx, marked(r.OldImage, ""), nil)
	if err == nil && !written && len(current) > 0 {
		if again, derr := idemdynamo.DecodeItem(current); derr == nil {
			if again.Renewed.After(at) {
				at = again.Renewed
			}
			old = keyRecord(rec, at)
			cur := keyRecord(again, now)
			kc := conflictaudit.DetectKey(old, cur)
			if conflictaudit.HoldKey(old, cur) || kc != nil && kc.Restore {
				written, _, err = a.Restore.Restore(ctx, marked(r.OldImage, cur.Run), current)
			}
			if err == nil && a.Conflicts.ObserveKey(old, cur) != nil {
				c.Conflicts++
			}
		}
	}
	if err != nil {
		a.log().ErrorContext(ctx, "audit: restoring the Layer-1 conflict's winner failed", slog.String("record", a.ref(rec.ID)),
			slog.String("error", err.Error()))
		return err
	}
	if written {
		c.Restored++
		msg := "audit: Layer-1 record deleted by another region's claim written back"
		if r.TTLDeletion() {
			msg = "audit: Layer-1 record deleted by another region's TTL written back"
		}
		a.log().WarnContext(ctx, msg, slog.String("record", a.ref(rec.ID)))
	}
	return nil
}
