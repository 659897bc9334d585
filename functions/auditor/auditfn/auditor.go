// Package auditfn is the auditor function's handler. It reads the effects
// and idempotency tables' streams (NEW_AND_OLD_IMAGES) and counts and logs
// the events an operator must see:
//
//   - reclaims: a record's attempt number grew while its previous owner still
//     held the claim (its lease expired: a crashed or stalled executor or
//     request), on either table;
//   - escaped effects: an effect attempt newly labelled "escaped" (it passed
//     the point of no return and its result is unknown; the next attempt
//     reuses the provider key);
//   - TTL-expired pending records: a REMOVE made by DynamoDB's TTL sweep
//     (userIdentity principal "dynamodb.amazonaws.com") of a record that was
//     still pending (Layer 1) or claimed/firing (Layer 2), i.e. work that
//     never reached an outcome. A pending Layer-1 record whose lease had
//     ended before the deletion was abandoned (a request nobody retried,
//     which a retry would have run again anyway) and is only logged, and
//     so is a claimed effect record (its owner stopped before the point of
//     no return) whose lease had ended;
//   - cross-region conflicts (multi-region deployments only, i.e. CROSS_REGION
//     reconciled-records or fenced-effects): an effects-table MODIFY whose new
//     image does not continue the old image's history, which in an MREC
//     global table is how a write from another region that overwrote this
//     region's claim (last-writer-wins) shows up in this region's stream.
//     Each one is recorded by functions/auditor/conflictaudit as a conflict event
//     (winner, loser, strategy, reason, opaque effect reference: no content,
//     no key) and counted in openwop.idempotency.cross_region_conflicts_total
//     with the bounded dimensions strategy, kind and region. Images are
//     decoded with ledger/dynamostore.DecodeRecord, the Store's own decoder;
//     run-reference items are skipped. On the idempotency table, a MODIFY
//     whose old and new images are two claims that each created a run is a
//     Layer-1 conflict (one key, two runs, one per region): recorded the same
//     way (kind "key": winner and loser run ids, strategy, the rule
//     lexicographic-min-run-id, the record as a keyhash), and, with Restore,
//     resolved: where this region holds the higher run, the lower one's image
//     is written back, so both regions converge on the lower run id whatever
//     order the writes replicated in (conflictaudit.DetectKey); without
//     Restore the event names the run the record kept the winner
//     (conflictaudit.Auditor.ObserveKeyKept), as an effect conflict whose
//     completed record is written back names that record the winner. The
//     write-back is marked with the run it writes over, and its own change
//     (read in this region's stream and, replicated, in the other's) is
//     not recorded again: one event per conflict. A REMOVE of
//     a record naming a run, within its retention at the deletion's time
//     (the other region's claim of the key, deleted there because its
//     answer is forgotten, or the other region's TTL deletion of an older,
//     expired item of the key: either replicated here as the key's newest
//     write), is written back: it is the key's only run (over a claim of
//     the key made here since, as over the other region's). TTL never
//     deletes a record here within its retention (its TTL attribute is the
//     retention end rounded up), so a TTL deletion of one is always the
//     other region's.
//
// Metrics are CloudWatch EMF lines (internal/emf) with the single bounded
// dimension "table" (effects | idempotency), except the conflict counter
// above. Log lines carry effect ids and Layer-1 record ids only as
// keyed hashes (the provider idempotency key is a public derivative of
// the effect id, identity.ProviderKey), with the run that created the
// effect record for correlation; conflict events carry effect ids, owner
// tokens and record ids only as keyed hashes too, keyed by the
// deployment's key-hash secret (Auditor.KeyHashSecret) so that every
// region's auditor names one record alike. The auditor only reads stream records, except for
// that one conditional restore of a Layer-1 winner and, with
// RestoreEffects, the conditional write-back of a completed effect record
// over the other region's claim that replaced it without an outcome (marked
// with that claim's owner token, so its own change is not recorded as a
// conflict again), and of an effect record deleted within its retention
// (the other region's TTL deleting its older record of the effect: the
// ledger deletes none). Every write-back is marked (attrRestoredOver), and
// no escape or reclaim is counted off a marked change. A restore that fails is
// reported as a batch item failure (ReportBatchItemFailures): the stream is
// delivered again from that record, so nothing audited before it is
// counted twice, and its own conflict is recorded once its restore is
// decided. A batch cut short by the function itself (a timeout, a crash)
// is delivered again whole and counts what it had counted again; a
// write-back still unanswered DefaultMargin before the invocation's
// deadline is cut there and reported as its record's failure instead.
package auditfn

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/keyhash"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// Metric names (EMF, dimension "table").
const (
	MetricReclaims   = "idemkit.audit.reclaims_total"
	MetricEscaped    = "idemkit.audit.escaped_total"
	MetricTTLPending = "idemkit.audit.ttl_expired_pending_total"
	// MetricRestoreFailures counts the write-backs that failed (one per
	// failed delivery of the record; dimension table: idempotency for
	// Layer-1 records, effects for effect records): each is reported as a
	// batch item failure, so the invocation succeeds and its Errors do not
	// show it.
	MetricRestoreFailures = "idemkit.audit.restore_failures_total"
	// MetricRestored counts the records the auditor wrote back: with
	// table=idempotency the Layer-1 records (Counts.Restored), a
	// conflict's winner or a record deleted by the other region's
	// forgotten claim; with table=effects the effect records
	// (Counts.RestoredEffects).
	MetricRestored = "idemkit.audit.restored_total"
)

// DefaultMargin is the time an invocation leaves before its deadline
// (Auditor.Margin): a write-back still unanswered then is cut there and
// reported as the batch item that failed, before Lambda would end the
// invocation as a timeout and the whole batch be delivered again.
const DefaultMargin = 2 * time.Second

// Table dimension values.
const (
	TableEffects     = "effects"
	TableIdempotency = "idempotency"
)

// Counts is what one batch contained.
type Counts struct {
	Reclaims, Escaped, TTLExpiredPending map[string]int // by table
	// Conflicts is the number of cross-region conflict events recorded
	// (effects and idempotency tables; always 0 without Auditor.Conflicts).
	Conflicts int
	// Restored is the number of Layer-1 conflict winners written back
	// (Auditor.Restore); RestoreErr the first restore that failed, and
	// Failed the EventID of its stream record: Audit stops there, so the
	// records after it in recs were not audited (redeliver from it;
	// HandleLambda reports it by its sequence number).
	Restored   int
	RestoreErr error
	Failed     string
	// RestoredEffects is the number of effect records written back
	// (Auditor.RestoreEffects): a completed record over the other region's
	// claim, or a record the other region's TTL deleted within its
	// retention.
	RestoredEffects int
	failedTable     string // the table of the record whose restore failed
}

func newCounts() Counts {
	return Counts{Reclaims: map[string]int{}, Escaped: map[string]int{}, TTLExpiredPending: map[string]int{}}
}

// Auditor audits stream records. Safe for concurrent use.
type Auditor struct {
	// Metrics receives the counters. Default nil: none.
	Metrics *emf.Recorder
	// Logger receives one line per event. Default slog.Default().
	Logger *slog.Logger
	// Conflicts, if set, audits every effects-table change for a
	// cross-region duplicate claim (see the package doc). Set it exactly
	// when the deployment is multi-region (NewFromEnv does). Default nil:
	// single-region, where one table cannot conflict with itself.
	Conflicts *conflictaudit.Auditor
	// Restore, if set (with Conflicts), writes a Layer-1 conflict's winner
	// (the record naming the lower run id) back into this region's replica
	// where replication left the loser (see conflictaudit.KeyConflict).
	// Default nil: Layer-1 conflicts are recorded, not resolved.
	Restore KeyRestorer
	// RestoreEffects, if set (with Conflicts), writes a completed effect
	// record back into this region's replica where the other region's
	// claim of the same effect replicated over it without an outcome
	// (firing, or released because its call did not leave): replication
	// would keep that claim, and a duplicate would take its release over
	// and call the provider again. One PutItem, conditional on the claim
	// as the change showed it (EffectTableRestorer); it replicates as the
	// newest write (completedOverwritten). Default nil: recorded, not
	// resolved.
	RestoreEffects KeyRestorer
	// Now is the clock a record's retention is judged by. Default time.Now.
	Now func() time.Time
	// Margin is the time HandleLambda leaves before the invocation's
	// deadline: a write-back still in flight then is cut and reported as
	// a failed batch item. Default DefaultMargin (2 s; the function's
	// timeout is 30 s).
	Margin time.Duration
	// KeyHashSecret keys the hashes that stand for effect and Layer-1
	// record ids in the auditor's own lines, as Conflicts' events key
	// theirs (conflictaudit.Config.KeyHashSecret): with the deployment's
	// secret a record's lines and its conflict event name it alike in
	// every region. Default "": a random salt per process. NewFromEnv sets
	// both from IDEMPOTENCY_KEY_HASH_SECRET.
	KeyHashSecret string
}

// ref renders an effect or record id for a log line: its hash keyed by
// KeyHashSecret.
func (a *Auditor) ref(id string) string { return keyhash.New(a.KeyHashSecret).Log(id) }

func (a *Auditor) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// HandleLambda is the Lambda handler.
func (a *Auditor) HandleLambda(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	recs := make([]stream.StreamRecord, 0, len(ev.Records))
	for _, r := range ev.Records {
		sr, err := stream.FromLambda(r)
		if err != nil {
			a.log().ErrorContext(ctx, "auditor: undecodable stream record", slog.String("event_id", r.EventID), slog.String("error", err.Error()))
			continue
		}
		recs = append(recs, sr)
	}
	// A failed restore is reported as the batch item that failed (the
	// event source mapping's ReportBatchItemFailures): the stream is
	// delivered again from that record, so the records audited before it
	// are not audited, nor their conflicts recorded, twice; the failed
	// record's conflict was not recorded (its restore undecided). The
	// failed record is named by its sequence number, as a stream's
	// partial batch response must (its eventID is no position in the
	// stream); a record without an EventID or a sequence number fails
	// the whole batch.
	// A write-back that never answers (a hung connection: the SDK bounds
	// no call by a time of its own) ran to the invocation's deadline,
	// where Lambda ends it as a timeout and the whole batch is delivered
	// again, its conflicts recorded again. Cut before it, it is a failed
	// write-back like any other: its record is reported (RED_TEAM 438).
	if dl, ok := ctx.Deadline(); ok {
		m := a.Margin
		if m <= 0 {
			m = DefaultMargin
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-m))
		defer cancel()
	}
	c := a.Audit(ctx, recs)
	if c.RestoreErr == nil {
		return events.DynamoDBEventResponse{}, nil
	}
	seq := sequenceOf(ev, c.Failed)
	if seq == "" {
		return events.DynamoDBEventResponse{}, c.RestoreErr
	}
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seq}}}, nil
}

// sequenceOf is the sequence number of ev's record whose EventID is id, ""
// when id is "" or names no record of ev.
func sequenceOf(ev events.DynamoDBEvent, id string) string {
	for _, r := range ev.Records {
		if id != "" && r.EventID == id {
			return r.Change.SequenceNumber
		}
	}
	return ""
}

// Audit counts, logs and emits metrics for recs, returning the counts. It
// stops at the first record whose Layer-1 restore fails (Counts.Failed).
func (a *Auditor) Audit(ctx context.Context, recs []stream.StreamRecord) Counts {
	c := newCounts()
	for _, r := range recs {
		if c.RestoreErr != nil {
			break
		}
		img := r.NewImage
		if img == nil {
			img = r.OldImage
		}
		if img == nil {
			continue
		}
		if _, ok := img["sk"]; ok {
			a.effect(ctx, r, &c)
		} else {
			a.idempotency(ctx, r, &c)
		}
	}
	if c.RestoreErr != nil {
		table := TableIdempotency
		if c.failedTable != "" {
			table = c.failedTable
		}
		a.Metrics.Count(MetricRestoreFailures, 1, map[string]string{"table": table})
	}
	if c.RestoredEffects > 0 {
		a.Metrics.Count(MetricRestored, float64(c.RestoredEffects), map[string]string{"table": TableEffects})
	}
	if c.Restored > 0 {
		a.Metrics.Count(MetricRestored, float64(c.Restored), map[string]string{"table": TableIdempotency})
	}
	for name, m := range map[string]map[string]int{MetricReclaims: c.Reclaims, MetricEscaped: c.Escaped, MetricTTLPending: c.TTLExpiredPending} {
		for table, n := range m {
			if n > 0 {
				a.Metrics.Count(name, float64(n), map[string]string{"table": table})
			}
		}
	}
	return c
}

func str(m map[string]types.AttributeValue, k string) string {
	if v, ok := m[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// abandoned reports whether a claim (a pending Layer-1 record, a claimed
// effect record) that the change r deleted was abandoned: the lease of
// its last claim, lease, ended at or before the deletion (deletedAt). A
// record that names no lease (lease zero, or at or before the Unix
// epoch, as a missing leaseAt reads) is not judged abandoned: it is
// counted. One rule for both tables.
func (a *Auditor) abandoned(lease time.Time, r stream.StreamRecord) bool {
	return lease.UnixMilli() > 0 && !lease.After(a.deletedAt(r))
}

// deletedAt is when the change r was made: its creation time (DynamoDB's
// clock), or the auditor's clock when it names none.
func (a *Auditor) deletedAt(r stream.StreamRecord) time.Time {
	if r.Created.IsZero() {
		return a.now()
	}
	return r.Created
}

func num(m map[string]types.AttributeValue, k string) int64 {
	if v, ok := m[k].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// decodeEffect decodes an effects-table image with the ledger's own decoder
// (never by mirroring attribute names); nil for an absent image or an item
// that is not a record (a run reference). Any other decoding failure is
// logged (the effect id is not readable then, so nothing identifying is).
func (a *Auditor) decodeEffect(ctx context.Context, m map[string]types.AttributeValue) *ledger.Record {
	r, err := ledgerdynamo.DecodeRecord(m)
	if err != nil {
		if !errors.Is(err, ledgerdynamo.ErrNotRecord) {
			a.log().ErrorContext(ctx, "auditor: undecodable effects record", slog.String("error", err.Error()))
		}
		return nil
	}
	return r
}

// escapedAttempts returns the numbers of the attempts labelled escaped.
func escapedAttempts(r *ledger.Record) map[int]bool {
	out := map[int]bool{}
	if r == nil {
		return out
	}
	for _, at := range r.Attempts {
		if at.State == ledger.AttemptEscaped {
			out[at.N] = true
		}
	}
	return out
}

// resolution reports whether r's latest attempt row is an operator's
// resolution (Ledger.Resolve), which never fires.
func resolution(r *ledger.Record) bool {
	return len(r.Attempts) > 0 && r.Attempts[len(r.Attempts)-1].Operator != ""
}

// completedOverwritten writes this region's completed effect record back
// where a claim of the same effect made in the other region (another
// history: a conflict) replaced it and has not recorded an outcome: still
// firing, or released because its call did not leave. Replication would
// otherwise keep that claim in both regions, and a duplicate would take
// its release over and call the provider again, although this region's
// call was delivered and recorded. With three regions or more, the claim
// the write finds may be a third region's, replicated over the first: it
// is written over the same way. The write is conditional on the claim
// as the change showed it (Auditor.RestoreEffects) and replicates as the
// newest write; there, the claim's own later writes are refused (its
// owner's condition) and a duplicate replays the recorded outcome. Where
// the write finds the same claim moved on without an outcome (its release
// arrived first), or finds another claim of another history without an
// outcome, it is written over that, conditional on it as found; a claim
// that recorded an outcome, or a record that moved on otherwise (a change
// delivered again after the records converged), is left alone.
func (a *Auditor) completedOverwritten(ctx context.Context, r stream.StreamRecord, oldRec, newRec *ledger.Record, c *Counts) (bool, error) {
	if a.RestoreEffects == nil || r.EventName != "MODIFY" || oldRec.State != ledger.StateCompleted || newRec.State == ledger.StateCompleted ||
		conflictaudit.Detect(oldRec, newRec) == nil {
		return false, nil
	}
	winner := marked(r.OldImage, newRec.Owner)
	written, current, err := a.RestoreEffects.Restore(ctx, winner, r.NewImage)
	if err == nil && !written && len(current) > 0 {
		// The same claim moved on, or, with three regions or more,
		// another region's claim replicated over it before this write:
		// either way a claim of another history without an outcome.
		// Without the latter, a completed record overwritten by two
		// regions' claims before its auditor read the first was lost
		// in every region (RED_TEAM 318).
		if cur := a.decodeEffect(ctx, current); cur != nil && cur.State != ledger.StateCompleted && cur.Key == oldRec.Key &&
			(cur.Owner == newRec.Owner && cur.Attempt == newRec.Attempt || conflictaudit.Detect(oldRec, cur) != nil) {
			written, _, err = a.RestoreEffects.Restore(ctx, winner, current)
		}
	}
	if err != nil {
		a.log().ErrorContext(ctx, "audit: writing back the completed effect record failed", slog.String("effect", a.ref(oldRec.EffectID)),
			slog.String("run_id", oldRec.RunID), slog.String("error", err.Error()))
		return false, err
	}
	if written {
		c.RestoredEffects++
		a.log().WarnContext(ctx, "audit: completed effect record written back over another region's claim", slog.String("effect", a.ref(oldRec.EffectID)),
			slog.String("run_id", oldRec.RunID), slog.String("claim_state", string(newRec.State)))
	}
	return written, nil
}

// effectRestoreEcho reports whether newImage, a completed record, was
// written back by an auditor over old's claim: marked (attrRestoredOver)
// with old's owner token.
func effectRestoreEcho(newImage map[string]types.AttributeValue, old, cur *ledger.Record) bool {
	v, ok := newImage[attrRestoredOver].(*types.AttributeValueMemberS)
	return ok && cur.State == ledger.StateCompleted && old.Owner != "" && v.Value == old.Owner
}

func holding(r *ledger.Record) bool {
	return r != nil && (r.State == ledger.StateClaimed || r.State == ledger.StateFiring)
}

func (a *Auditor) effect(ctx context.Context, r stream.StreamRecord, c *Counts) {
	oldRec, newRec := a.decodeEffect(ctx, r.OldImage), a.decodeEffect(ctx, r.NewImage)
	if oldRec == nil && newRec == nil {
		return
	}
	// A completed record an auditor wrote back over oldRec's claim
	// (marked with its owner) is the write-back's own change, in this
	// region's stream or the other's: its conflict was recorded where it
	// was written, and the escapes and reclaims of its history were
	// counted when that history was written. Nothing of it is counted.
	// So is a record written back where the other region's TTL deleted
	// it (effectDeleted): an INSERT here and where it replicates to.
	if a.Conflicts != nil && newRec != nil && (oldRec == nil && writtenBack(r.NewImage) || oldRec != nil && effectRestoreEcho(r.NewImage, oldRec, newRec)) {
		return
	}
	// A stream change with both images (a MODIFY; DynamoDB never gives an
	// INSERT an old image) is checked for a cross-region overwrite.
	if a.Conflicts != nil && oldRec != nil && newRec != nil && (r.EventName == "MODIFY" || r.EventName == "INSERT") {
		written, err := a.completedOverwritten(ctx, r, oldRec, newRec, c)
		if err != nil {
			// Nothing else of this record is counted: it is
			// delivered again.
			c.RestoreErr, c.Failed, c.failedTable = err, r.EventID, TableEffects
			return
		}
		// The event's winner is the record the replicas keep: the
		// completed record where it was written back (RED_TEAM 504).
		observe := a.Conflicts.Observe
		if written {
			observe = a.Conflicts.ObserveWrittenBack
		}
		if observe(oldRec, newRec) != nil {
			c.Conflicts++
		}
	}
	rec := newRec
	if rec == nil {
		rec = oldRec
	}
	// The effect id only as a keyhash (the provider key derives from it),
	// and the run that created the record, for correlation.
	id, run := slog.String("effect", a.ref(rec.EffectID)), slog.String("run_id", rec.RunID)
	switch r.EventName {
	case "MODIFY", "INSERT":
		switch {
		case r.EventName == "MODIFY" && newRec != nil && oldRec != nil && newRec.Attempt > oldRec.Attempt && resolution(newRec):
			// An operator settled an escaped effect (Ledger.Resolve): its
			// row raises the attempt, but nothing was reclaimed.
			a.log().InfoContext(ctx, "audit: effect resolved by an operator", id, run,
				slog.String("previous_state", string(oldRec.State)), slog.String("state", string(newRec.State)), slog.Int("attempt", newRec.Attempt))
		case r.EventName == "MODIFY" && newRec != nil && holding(oldRec) && newRec.Attempt > oldRec.Attempt:
			c.Reclaims[TableEffects]++
			a.log().WarnContext(ctx, "audit: effect claim reclaimed", id, run,
				slog.String("previous_state", string(oldRec.State)), slog.Int("attempt", newRec.Attempt))
		}
		before := escapedAttempts(oldRec)
		for n := range escapedAttempts(newRec) {
			if !before[n] {
				c.Escaped[TableEffects]++
				a.log().WarnContext(ctx, "audit: effect attempt escaped", id, run, slog.Int("attempt", n))
			}
		}
	case "REMOVE":
		restored := false
		if a.Conflicts != nil && oldRec != nil {
			var err error
			if restored, err = a.effectDeleted(ctx, r, oldRec, c); err != nil {
				c.RestoreErr, c.Failed, c.failedTable = err, r.EventID, TableEffects
				return
			}
		}
		// A live claim the other region's TTL deleted, written back, is
		// no expired one: its owner still records its outcome.
		if r.TTLDeletion() && holding(oldRec) && !restored {
			if oldRec.State == ledger.StateClaimed && a.abandoned(oldRec.LeaseUntil, r) {
				// Abandoned before the point of no return (its lease
				// ended): no provider call under it, and a later claim
				// would have taken it over anyway; nothing to page for.
				// A record naming no lease is counted.
				a.log().InfoContext(ctx, "audit: TTL deleted an abandoned effect claim", id, run)
			} else {
				c.TTLExpiredPending[TableEffects]++
				a.log().ErrorContext(ctx, "audit: TTL deleted an unfinished effect claim", id, run, slog.String("state", string(oldRec.State)))
			}
		}
	}
}

// effectDeleted writes back an effect record deleted here within its
// retention. The ledger never deletes a record, and TTL (or the sweeper)
// deletes none before its retention ends in its own replica (its TTL
// attribute is the retention end rounded up to the second), so such a
// deletion is the other region's TTL deleting its older, expired record of
// the same effect, replicated here as the newest write: under
// reconciled-records it deleted the record of the effect performed anew
// here after that retention, in both regions, and a duplicate would call
// the provider again. The record is written back where the replica holds
// no item (one PutItem conditional on that), and replicates as the newest
// write; where a duplicate claimed the effect anew meanwhile (the record
// was absent from the deletion until the write), it is left alone. The
// retention is judged at the deletion's time (DynamoDB's clock) or this
// function's, the later: a record expired by either is not written back.
// It reports whether the record was written back.
func (a *Auditor) effectDeleted(ctx context.Context, r stream.StreamRecord, rec *ledger.Record, c *Counts) (bool, error) {
	if a.RestoreEffects == nil {
		return false, nil
	}
	at := a.now()
	if r.Created.After(at) {
		at = r.Created
	}
	if !rec.Live(at) {
		return false, nil
	}
	written, _, err := a.RestoreEffects.Restore(ctx, marked(r.OldImage, ""), nil)
	if err != nil {
		a.log().ErrorContext(ctx, "audit: writing back the deleted effect record failed", slog.String("effect", a.ref(rec.EffectID)),
			slog.String("run_id", rec.RunID), slog.String("error", err.Error()))
		return false, err
	}
	if written {
		c.RestoredEffects++
		a.log().WarnContext(ctx, "audit: effect record deleted by another region's TTL written back", slog.String("effect", a.ref(rec.EffectID)),
			slog.String("run_id", rec.RunID), slog.String("state", string(rec.State)))
	}
	return written, nil
}

func (a *Auditor) idempotency(ctx context.Context, r stream.StreamRecord, c *Counts) {
	pk := str(r.NewImage, "pk")
	if pk == "" {
		pk = str(r.OldImage, "pk")
	}
	switch r.EventName {
	case "MODIFY":
		if a.Conflicts != nil {
			if err := a.keyConflict(ctx, r, c); err != nil {
				// Nothing else of this record is counted: it is
				// delivered again.
				c.RestoreErr, c.Failed = err, r.EventID
				return
			}
		}
		oldState := str(r.OldImage, "state")
		// An auditor's write-back over a pending claim (a hold) raises the
		// attempt the item shows without reclaiming anything.
		if num(r.NewImage, "attempt") > num(r.OldImage, "attempt") && oldState == "pending" && !writtenBack(r.NewImage) {
			c.Reclaims[TableIdempotency]++
			a.log().WarnContext(ctx, "audit: idempotency lease reclaimed", slog.String("record", a.ref(pk)),
				slog.Int64("attempt", num(r.NewImage, "attempt")))
		}
	case "REMOVE":
		if r.TTLDeletion() && str(r.OldImage, "state") == "pending" {
			if a.abandoned(time.UnixMilli(num(r.OldImage, "leaseAt")), r) {
				// Abandoned: its claim's lease (leaseAt, Unix ms) ended
				// before the deletion (a request nobody retried), so no
				// handler held it and a retry would have run again
				// anyway; nothing to page for.
				a.log().InfoContext(ctx, "audit: TTL deleted an abandoned pending idempotency record", slog.String("record", a.ref(pk)))
			} else {
				c.TTLExpiredPending[TableIdempotency]++
				a.log().ErrorContext(ctx, "audit: TTL deleted a pending idempotency record", slog.String("record", a.ref(pk)))
			}
		}
		if a.Conflicts != nil {
			if err := a.keyDeleted(ctx, r, c); err != nil {
				c.RestoreErr, c.Failed = err, r.EventID
			}
		}
	}
}
