package runs

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/internal/clock"
)

// DynamoAPI is the subset of *dynamodb.Client the host stores use.
type DynamoAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// DynamoRuns is the RunsTable RunStore (partition key pk = runId).
//
// Item: pk, tenant, workflowId, inputs (JSON text), status, error,
// errorCode (Breach),
// liveShard (on live runs only: the byLive index, see stale.go),
// createdAt and updatedAt (Unix ms), failures and lastError (NoteFailure),
// failTok and writeTok (the token of the last NoteFailure call, and of the
// last other write of the run, by which a call whose answer was lost
// recognises its own landed write),
// retryOf (a retry's failed run), retries (a string set: the runs retrying
// a failed run), claimEpoch (Run.Epoch, absent on a run never taken), version and history (the version log: a
// list with one map per version, field -> JSON text of the value set; every
// update adds 1 to version and appends its map in the same UpdateItem),
// activityIdentityRecipe and
// semanticRequestRecipe (the run's recipe stamps, written once by Create and
// never updated), configurable, tags and metadata (the run's RunOptions,
// JSON text, each present only when given; written once by Create and
// never updated), expiresAt (the TTL attribute, epoch seconds: on an
// ended run of a store with a Retention only; retention.go).
//
// The table also holds one item per run scope ever held (CreateScoped,
// scope_dynamo.go: pk "#scope/v1/…", tenant, holder, heldSince; never
// deleted, overwritten by each takeover) and a tombstone (pk a runId,
// scopeTakenOver) at the runId of a scope holder that was never written,
// written by the create that took its scope over; neither reads as a run.
type DynamoRuns struct {
	// Client is the DynamoDB client. Required.
	Client DynamoAPI
	// Table is the RunsTable name. Required.
	Table string
	// Transactional makes Create, when it runs under a Layer-1 claim
	// (idem.Transact), hand its PutItem to the idempotency store so that it
	// commits in ONE transaction with the completion record: the run then
	// exists if and only if the 201 that names it was recorded, however
	// often the request is retried or reclaimed. Set it only when the
	// idempotency store is idem/dynamostore on the same DynamoDB endpoint as
	// Table, and that endpoint supports transactions. Default false: a
	// conditional PutItem. A run's Put found taken only by the completion
	// transaction is not CreateScoped's error but the cancelled
	// completion's cause (idem.TransactOr), the same error the conditional
	// PutItem gives: a *ScopeHeldError where a takeover of its scope fenced
	// the run's id, which the handler answers through idem.OnConflict.
	// Outside a claim (a request sent without a key) a retry's run and
	// its listing on the failed run commit in one TransactWriteItems of
	// their own (Client must implement it, as a *dynamodb.Client does),
	// so its id is never listed without its run; any other run is its
	// conditional PutItem.
	Transactional bool
	// Retention is how long an ended run is kept after its end: the write
	// that ends it (Transition or Cancel to a terminal status, Breach)
	// also sets the TTL attribute expiresAt to its end + Retention in
	// epoch seconds (retention.go), for RunsTable's TimeToLiveSpecification.
	// A live run never carries it. Default 0: no expiresAt, kept forever.
	Retention time.Duration
	// MarkerRetention is how long a cancel's marker (a Cancel from pending
	// of an id no run holds, without the transaction: cancelUnwritten) is
	// kept: its write sets expiresAt to the cancel's time + MarkerRetention
	// in epoch seconds. Default 0: kept forever. A marker must outlive
	// every write of a run at its id that may still come, and a Layer-1
	// record re-executes its create under the same run id (ClaimRunID)
	// for as long as the record is kept, which each reclaim prolongs: so
	// set it only where no run is created under a record (Layer 1 off),
	// where a marker is needed only while the request that listed the id
	// is still writing its run, and to far more than any request lives.
	MarkerRetention time.Duration
	// ReturnsOldOnConditionFailure says the engine returns the item a
	// refused conditional write found whenever there is one
	// (ReturnValuesOnConditionCheckFailure ALL_OLD), as DynamoDB and moto
	// do: a run write refused with no item returned then found no run,
	// and is answered ErrRunNotFound with no read (RED_TEAM 521: a cancel
	// of no run read the run its refused write did not return, a read
	// that on DynamoDB always found nothing). Set it only for such an
	// engine: on one that returns no item (dynalite, DynamoDB Local) a
	// write refused by a run that is there would be answered as no run.
	// The kit sets it where the client has no endpoint override
	// (DynamoDB itself). Default false: the read, on that path only.
	ReturnsOldOnConditionFailure bool
	// Now is the clock that tells a run past its expiry (only read when
	// an item carries one): such a run reads as missing, as MemRuns reads
	// it, though RunsTable's TTL deletes it only some time later (up to
	// days). Default: the system clock.
	Now func() time.Time

	// conflictWait waits d before createListed sends again a transaction
	// cancelled by a conflict alone, returning ctx's error should ctx end
	// first. Default nil: clock.Sleep, a timer. Tests set it to record the
	// waits asked for instead of waiting.
	conflictWait func(ctx context.Context, d time.Duration) error
}

const (
	runAttrPK      = "pk"
	runAttrTenant  = "tenant"
	runAttrWF      = "workflowId"
	runAttrInputs  = "inputs"
	runAttrStatus  = "status"
	runAttrError   = "error"
	runAttrErrCode = "errorCode"    // S: Run.ErrorCode, set only by Breach
	runAttrCancBy  = "cancelledBy"  // S: Run.CancelledBy, set only by Cancel
	runAttrCancWhy = "cancelReason" // S: Run.CancelReason, set only by Cancel
	runAttrCreated = "createdAt"
	runAttrUpdated = "updatedAt"
	runAttrFails   = "failures"
	runAttrLastErr = "lastError"
	runAttrFailTok = "failTok"
	// runAttrWriteTok (S) is the token of the call that last wrote the
	// run through updateRun, by which a write whose answer was lost is
	// recognised as that call's own (RED_TEAM 500).
	runAttrWriteTok = "writeTok"
	runAttrAIR      = "activityIdentityRecipe"
	runAttrSRR      = "semanticRequestRecipe"
	runAttrWakeAt   = "wakeAt"    // Unix ms; only on parked runs
	runAttrWake     = "wakeShard" // "due" on parked runs: the sparse byWake index's key
	runAttrWakeN    = "wakeAttempt"
	runAttrWakeMax  = "wakeMaxAttempts"
	runAttrWakeDL   = "wakeDeadline"
	runAttrRetryOf  = "retryOf"
	runAttrRetries  = "retries"      // SS: the runs retrying this failed run (Run.Retries)
	runAttrVersion  = "version"      // N: the run's version (Run.Version)
	runAttrHistory  = "history"      // L of M{field: S(JSON value)}: the version log
	runAttrLive     = "liveShard"    // "live#N" on live runs: the sparse byLive index's key
	runAttrEpoch    = "claimEpoch"   // N: the executor claim's fencing token (Run.Epoch)
	runAttrConfig   = "configurable" // S: RunOptions.configurable, JSON text (Run.Options)
	runAttrTags     = "tags"         // S: RunOptions.tags, JSON text
	runAttrMeta     = "metadata"     // S: RunOptions.metadata, JSON text
	// runAttrCancelledUnwritten (N, Unix ms) marks the item a cancel
	// writes at a run id no run holds yet (cancelUnwritten): not a run
	// (RunFromItem), honoured by the retry's Create (taken).
	runAttrCancelledUnwritten = "cancelledUnwritten"
	wakeShard                 = "due"
)

// indexByWake is the RunsTable GSI serving Due: partition wakeShard (one
// value, "due", present only on parked runs, so the index holds only
// them), sort wakeAt.
const indexByWake = "byWake"

func sAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func nAV(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func runItem(r Run) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		runAttrPK:      sAV(r.ID),
		runAttrTenant:  sAV(r.Tenant),
		runAttrWF:      sAV(r.WorkflowID),
		runAttrStatus:  sAV(string(r.Status)),
		runAttrCreated: nAV(r.CreatedAt.UnixMilli()),
		runAttrUpdated: nAV(r.UpdatedAt.UnixMilli()),
		runAttrAIR:     sAV(r.ActivityIdentityRecipe),
		runAttrSRR:     sAV(r.SemanticRequestRecipe),
	}
	if len(r.Inputs) > 0 {
		m[runAttrInputs] = sAV(string(r.Inputs))
	}
	if r.Error != "" {
		m[runAttrError] = sAV(r.Error)
	}
	if r.ErrorCode != "" {
		m[runAttrErrCode] = sAV(r.ErrorCode)
	}
	optionsItem(m, r.Options)
	if r.RetryOf != "" {
		m[runAttrRetryOf] = sAV(r.RetryOf)
	}
	if !r.Status.Terminal() {
		m[runAttrLive] = sAV(liveShardOf(r.ID))
	} else if !r.ExpiresAt.IsZero() {
		m[attrExpiresAt] = nAV(r.ExpiresAt.Unix())
	}
	m[runAttrVersion] = nAV(r.Version)
	if r.Epoch != 0 {
		m[runAttrEpoch] = nAV(r.Epoch)
	}
	l := make([]types.AttributeValue, 0, len(r.History))
	for _, v := range r.History {
		l = append(l, versionAV(v))
	}
	m[runAttrHistory] = &types.AttributeValueMemberL{Value: l}
	forkItem(m, r)
	return m
}

// optionsItem adds the run's RunOptions to its item: each given value as
// JSON text.
func optionsItem(m map[string]types.AttributeValue, o Options) {
	for name, v := range map[string]json.RawMessage{runAttrConfig: o.Configurable, runAttrTags: o.Tags, runAttrMeta: o.Metadata} {
		if len(v) > 0 {
			m[name] = sAV(string(v))
		}
	}
}

// optionsFromItem reads the run's RunOptions back (nil for each absent).
func optionsFromItem(m map[string]types.AttributeValue) Options {
	get := func(name string) json.RawMessage {
		if v, ok := m[name].(*types.AttributeValueMemberS); ok && v.Value != "" {
			return json.RawMessage(v.Value)
		}
		return nil
	}
	return Options{Configurable: get(runAttrConfig), Tags: get(runAttrTags), Metadata: get(runAttrMeta)}
}

// versionAV encodes one version of the log: M{field: S(JSON value)}.
func versionAV(v map[string]json.RawMessage) types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(v))
	for f, x := range v {
		m[f] = sAV(string(x))
	}
	return &types.AttributeValueMemberM{Value: m}
}

// historyFromAV decodes the version log (nil when absent).
func historyFromAV(av types.AttributeValue) decided.VersionLog {
	l, ok := av.(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	out := make(decided.VersionLog, 0, len(l.Value))
	for _, e := range l.Value {
		v := map[string]json.RawMessage{}
		if m, ok := e.(*types.AttributeValueMemberM); ok {
			for f, x := range m.Value {
				if sv, ok := x.(*types.AttributeValueMemberS); ok && json.Valid([]byte(sv.Value)) {
					v[f] = json.RawMessage(sv.Value)
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// newVersion adds to upd the version bump and the log entry v, so that the
// version and its log commit in the same UpdateItem as the change.
func newVersion(upd expression.UpdateBuilder, v map[string]json.RawMessage) expression.UpdateBuilder {
	empty := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	entry := &types.AttributeValueMemberL{Value: []types.AttributeValue{versionAV(v)}}
	return upd.Add(expression.Name(runAttrVersion), expression.Value(1)).
		Set(expression.Name(runAttrHistory), expression.ListAppend(
			expression.IfNotExists(expression.Name(runAttrHistory), expression.Value(empty)), expression.Value(entry)))
}

// RunFromItem decodes a RunsTable item (also used for stream images); an
// item of the table that is not a run (its pk starts with "#": a caller's
// inbox) reads as not a run (false). The
// status goes through ParseStatus, so an item written by an earlier version
// with status "succeeded" decodes as StatusCompleted. An
// item without recipe stamps decodes with empty stamps, which the executor
// refuses to derive identities from (ledger.ErrUnsupportedRecipe).
func RunFromItem(m map[string]types.AttributeValue) (Run, bool) {
	s := func(k string) string {
		if v, ok := m[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	n := func(k string) time.Time {
		if v, ok := m[k].(*types.AttributeValueMemberN); ok {
			if i, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
				return time.UnixMilli(i).UTC()
			}
		}
		return time.Time{}
	}
	r := Run{ID: s(runAttrPK), Tenant: s(runAttrTenant), WorkflowID: s(runAttrWF), Status: ParseStatus(s(runAttrStatus)),
		Error: s(runAttrError), CreatedAt: n(runAttrCreated), UpdatedAt: n(runAttrUpdated)}
	r.ActivityIdentityRecipe, r.SemanticRequestRecipe = s(runAttrAIR), s(runAttrSRR)
	r.LastError, r.RetryOf, r.ErrorCode = s(runAttrLastErr), s(runAttrRetryOf), s(runAttrErrCode)
	r.CancelledBy = s(runAttrCancBy)
	r.CancelReason = s(runAttrCancWhy)
	if v, ok := m[runAttrRetries].(*types.AttributeValueMemberSS); ok {
		r.Retries = slices.Sorted(slices.Values(v.Value))
	}
	if v, ok := m[runAttrVersion].(*types.AttributeValueMemberN); ok {
		r.Version, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	if v, ok := m[runAttrEpoch].(*types.AttributeValueMemberN); ok {
		r.Epoch, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	r.History = historyFromAV(m[runAttrHistory])
	r.Wake.At, r.Wake.Deadline = n(runAttrWakeAt), n(runAttrWakeDL)
	if v, ok := m[runAttrWakeN].(*types.AttributeValueMemberN); ok {
		r.Wake.Attempt, _ = strconv.Atoi(v.Value)
	}
	if v, ok := m[runAttrWakeMax].(*types.AttributeValueMemberN); ok {
		r.Wake.MaxAttempts, _ = strconv.Atoi(v.Value)
	}
	if r.Wake.At.IsZero() {
		r.Wake = Wake{}
	}
	if v, ok := m[runAttrFails].(*types.AttributeValueMemberN); ok {
		r.Failures, _ = strconv.Atoi(v.Value)
	}
	if in := s(runAttrInputs); in != "" {
		r.Inputs = []byte(in)
	}
	r.Options = optionsFromItem(m)
	if v, ok := m[attrExpiresAt].(*types.AttributeValueMemberN); ok {
		if sec, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
			r.ExpiresAt = time.Unix(sec, 0).UTC()
		}
	}
	forkFromItem(m, &r)
	pauseFromItem(m, &r)
	_, tomb := m[runAttrTakenOver]
	_, unwritten := m[runAttrCancelledUnwritten]
	return r, r.ID != "" && !strings.HasPrefix(r.ID, itemPrefix) && !tomb && !unwritten
}

// Create implements RunStore: a PutItem conditional on attribute_not_exists(pk),
// or, when Transactional and under a claim, the same Put inside the
// completion transaction. A retry's link to its failed run (LinkRetry's
// UpdateItem, its condition also requiring the failed run's retries set
// to hold fewer than MaxRetries ids or r's) goes in the same transaction;
// when Transactional outside a claim, in one TransactWriteItems with the
// Put (createListed); without transactions it precedes the PutItem (one
// more round trip): no run is written before its listing is granted. A
// refused link costs a read of the failed run (is it the cap?) and writes
// nothing. A PutItem
// that finds the id taken asks for the item there (ALL_OLD) and returns
// the run as a *RunExistsError; where the engine returns none, a retry's
// Create reads it (to tell a run retrying r.RetryOf, which keeps its
// listing, from another's, whose listing is removed again: one write). A
// PutItem whose every answer was lost (the SDK gave up) has the id read
// back on that error path only, and a run found there is answered as the
// refused retry's (RED_TEAM 523).
func (d *DynamoRuns) Create(ctx context.Context, r Run) error {
	if err := checkNew(r); err != nil {
		return err
	}
	return d.create(ctx, r)
}

// create is Create once r was checked (checkNew).
func (d *DynamoRuns) create(ctx context.Context, r Run) error { return d.createIn(ctx, r, "") }

// createIn is create, and CreateScoped's run write for the scope item
// scope ("" for none). In the completion transaction, the run's Put is
// registered with its cause (TransactOr, putCause): should its condition
// cancel the transaction, the cause is the same error the conditional
// PutItem gives (a *ScopeHeldError where a takeover's tombstone fenced r's
// id, else ErrRunExists), for the handler to answer (idem.OnConflict); a
// retry's capped link, a *RetryLimitError (createCause).
func (d *DynamoRuns) createIn(ctx context.Context, r Run, scope string) error {
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(runAttrPK))).Build()
	if err != nil {
		return err
	}
	item := runItem(withFirstVersion(r))
	if d.Transactional {
		writes := []any{types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(d.Table), Item: item,
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		}}}
		if r.RetryOf != "" {
			u, err := d.linkRetryUpdate(r.RetryOf, r.ID, true)
			if err != nil {
				return err
			}
			writes = append(writes, types.TransactWriteItem{Update: &types.Update{TableName: u.TableName, Key: u.Key,
				UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
				ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues}})
		}
		err := idem.TransactOr(ctx, d.createCause(r, scope), writes...)
		if err == nil {
			return nil
		}
		if !errors.Is(err, idem.ErrNoClaim) {
			return err
		}
		if r.RetryOf != "" {
			// Outside a claim (a retry sent without a key) the run and
			// its listing still commit together (RED_TEAM 369).
			return d.createListed(ctx, r, writes)
		}
	}
	if r.RetryOf != "" {
		// Listed first (RED_TEAM 316): a run is written only once its
		// listing is granted, so a retry refused at the cap writes no run
		// for the executor to take from the runs stream. A listing whose
		// run write then fails names a run not written yet; the request's
		// re-execution (its run id fixed, ClaimRunID) finds its id listed,
		// passes the cap and writes it.
		if err := d.link(ctx, r.RetryOf, r.ID, true); err != nil {
			return err
		}
	}
	_, err = d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.Table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return d.taken(ctx, r, ccf.Item, true)
	}
	if err != nil && ctx.Err() == nil && !refused(err) {
		// The SDK gave up, every answer lost or refused: the write may
		// have landed. The item at r's id, read back on this error path
		// only, is what the SDK's refused retry would have returned
		// (RED_TEAM 523): answered as that retry's refusal is (taken),
		// the run found there, which the caller tells for its own.
		if old, gerr := d.getItem(ctx, r.ID); gerr == nil && len(old) > 0 {
			return d.taken(ctx, r, old, true)
		}
	}
	return conditionalWrite(err, nil, "put run")
}

// listedTries is how many times createListed sends its transaction while
// it is cancelled by conflicts alone (conflictOnly), with a jittered wait
// before each send after the first (listedWait). Four sends: a conflict
// means another transaction on the failed run (a racing retry's) is under
// way, and it ends within a few tens of milliseconds; three waits of at
// most 10, 20 and 40 ms (70 ms in all, well inside the api function's
// 29 s timeout) spread a burst of retries of one failed run across that
// time, where sends with no pause between them met the same transaction
// again. More sends would hold a request that a sustained burst keeps
// losing; past them it is answered 503 with Retry-After, which spreads
// its client's next try by seconds.
const listedTries = 4

// listedWaitBase is the bound of the first wait between createListed's
// sends; each later wait's bound is twice the one before, up to
// listedWaitCap.
const (
	listedWaitBase = 10 * time.Millisecond
	listedWaitCap  = 100 * time.Millisecond
)

// listedWaitBound is the bound of the wait before send try+1 (try >= 1
// sends made): listedWaitBase doubled try-1 times, at most listedWaitCap.
func listedWaitBound(try int) time.Duration {
	b := listedWaitBase
	for i := 1; i < try && b < listedWaitCap; i++ {
		b *= 2
	}
	return min(b, listedWaitCap)
}

// listedWait is the wait before send try+1: full jitter, a uniformly
// random duration in [0, listedWaitBound(try)], so that retries cancelled
// by one another's transactions do not meet again at once.
func listedWait(try int) time.Duration {
	return time.Duration(mrand.Int64N(int64(listedWaitBound(try)) + 1))
}

// conflictOnly reports whether a transaction was cancelled by a conflict
// with another transaction and for no other reason (a failed condition, a
// validation error).
func conflictOnly(reasons []types.CancellationReason) bool {
	conflict := false
	for _, r := range reasons {
		switch aws.ToString(r.Code) {
		case "TransactionConflict":
			conflict = true
		case "", "None":
		default:
			return false
		}
	}
	return conflict
}

// transactAPI is the TransactWriteItems operation of *dynamodb.Client,
// used by createListed.
type transactAPI interface {
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// createListed is Create of a retry r outside a Layer-1 claim where the
// store is Transactional: writes (the run's conditional Put, then its
// capped listing on r.RetryOf) in one TransactWriteItems of their own
// (RED_TEAM 369). As two writes, the listing first, a cancel of the id
// between them (a client that read the failed run's retries) was
// answered not found, no marker being written under the transaction,
// and the run was then written pending, for the executor to start. In
// one transaction the id is never listed without its run. One round
// trip where the two writes cost two; a transactional write's units are
// twice a plain write's. A cancelled transaction wrote nothing: its Put
// refused is the id taken (taken, the listing not made); its listing
// refused, the cap (a *RetryLimitError, one read) or the failed run gone
// (an error). Where the engine gives no reason per write, the id is read
// to tell. A transaction cancelled by a conflict alone (another retry's
// transaction on the failed run) is sent again after a jittered wait
// (listedWait), up to listedTries sends; one cancelled past them, or for another passing reason, has the id read
// (an earlier send may have landed with its answer lost), as has one the
// SDK gave up on (RED_TEAM 524).
func (d *DynamoRuns) createListed(ctx context.Context, r Run, writes []any) error {
	tx, ok := d.Client.(transactAPI)
	if !ok {
		return errors.New("host: the runs client cannot TransactWriteItems (DynamoRuns.Transactional)")
	}
	items := make([]types.TransactWriteItem, 0, len(writes))
	for _, w := range writes {
		items = append(items, w.(types.TransactWriteItem))
	}
	items[0].Put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	var tce *types.TransactionCanceledException
	var err error
	for try := 1; ; try++ {
		_, err = tx.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &tce):
			// The SDK gave up, every answer lost or refused: a send may
			// have landed. The id, read back on this error path only,
			// answers as a lost answer's cancelled send does (RED_TEAM
			// 524): else the keyless client, told to try again, would
			// retry into a second run.
			if ctx.Err() == nil && !refused(err) {
				if old, gerr := d.getItem(ctx, r.ID); gerr == nil && len(old) > 0 {
					return d.taken(ctx, r, old, false)
				}
			}
			return fmt.Errorf("host: put listed run: %w", err)
		}
		if try == listedTries || !conflictOnly(tce.CancellationReasons) {
			break
		}
		// Cancelled by another transaction on the failed run (a racing
		// retry's): nothing was written; sent again after a jittered wait
		// (RED_TEAM 379), as the listing's UpdateItem, serialized by
		// DynamoDB, never met this. A request whose context ends during
		// the wait sends nothing more and is answered with that: no read
		// of the id, which that context could not make.
		wait := d.conflictWait
		if wait == nil {
			wait = clock.Sleep
		}
		if werr := wait(ctx, listedWait(try)); werr != nil {
			return fmt.Errorf("host: put listed run: %w, then %w before sending it again", err, werr)
		}
	}
	reasons := tce.CancellationReasons
	refused := func(i int) bool {
		return len(reasons) == len(items) && aws.ToString(reasons[i].Code) == "ConditionalCheckFailed"
	}
	switch {
	case refused(0):
		return d.taken(ctx, r, reasons[0].Item, false)
	case refused(1):
	case len(reasons) == len(items):
		// Cancelled for another reason (conflicts with other
		// transactions past listedTries, throttling): this send wrote
		// nothing, retryable. An earlier send whose answer was lost (the
		// SDK's retry, or one of listedTries) may have written the run
		// and its listing: the id is read, on this path only, so that
		// such a create is answered with its run, not an error its
		// client would send again into a second run (RED_TEAM 371).
		old, gerr := d.getItem(ctx, r.ID)
		if gerr == nil && len(old) > 0 {
			return d.taken(ctx, r, old, false)
		}
		return fmt.Errorf("host: put listed run: %w", err)
	default:
		old, gerr := d.getItem(ctx, r.ID)
		if gerr != nil {
			return gerr
		}
		if len(old) > 0 {
			return d.taken(ctx, r, old, false)
		}
	}
	switch cerr := d.atCap(ctx, r.RetryOf, r.ID); {
	case errors.Is(cerr, ErrRetryLimit):
		return cerr
	case errors.Is(cerr, ErrRunNotFound):
		return fmt.Errorf("host: create retry: the failed run %s is gone: %w", r.RetryOf, err)
	case cerr != nil:
		return cerr
	}
	return fmt.Errorf("host: put listed run: %w", err)
}

// taken is Create's error for r's id found taken, old the item its
// refused PutItem returned (ALL_OLD; empty where the engine returns
// none): a *RunExistsError holding the run there, for the caller to
// answer for without reading it again (RED_TEAM 344), else ErrRunExists.
// A retry's id, which Create listed before finding it taken (listed), is
// taken off the retries of r.RetryOf again when the run there does not
// retry that failed run (unlistStranger): a retry lists only a run
// retrying it. The run there retrying it (a re-execution of the same
// request, or a lost answer's retry) keeps its listing (Listed). A
// retry's id found taken by a cancelled transaction (createListed) was
// not listed by it: nothing to take off, and Listed is false. Where the
// engine returned no item, a retry's id costs a read of the run to tell;
// a stranger's, a write.
func (d *DynamoRuns) taken(ctx context.Context, r Run, old map[string]types.AttributeValue, listed bool) error {
	if len(old) == 0 && r.RetryOf != "" {
		var err error
		if old, err = d.getItem(ctx, r.ID); err != nil {
			return err
		}
	}
	if _, ok := old[runAttrCancelledUnwritten]; ok && r.RetryOf != "" {
		return d.writeCancelled(ctx, r, old, listed)
	}
	got, ok := RunFromItem(old)
	if !ok {
		// No run to tell by (not returned; a takeover's tombstone, a
		// run expired since): a retry's listing is left as it is.
		return ErrRunExists
	}
	switch {
	case r.RetryOf == "":
		return &RunExistsError{Run: got}
	case got.RetryOf == r.RetryOf:
		return &RunExistsError{Run: got, Listed: listed}
	}
	if listed {
		if err := d.unlistStranger(ctx, r); err != nil {
			return err
		}
	}
	return &RunExistsError{Run: got}
}

// writeCancelled writes r, a retry whose id a cancel reached before its
// run was written (the marker m, cancelUnwritten), as that cancel left
// it: cancelled, by and for whom the cancel said, its version log its
// creation and its cancel, never live. One PutItem conditional on the
// marker being there still, on this path only (RED_TEAM 345): the run is
// never pending, so no executor starts it (the runs stream's record of it
// replaces an item, and is no insert). Its id stays listed (Listed, when
// Create listed it: listed). A marker gone meanwhile (another execution
// of the request wrote the run) is answered as the run found there
// (taken).
func (d *DynamoRuns) writeCancelled(ctx context.Context, r Run, m map[string]types.AttributeValue, listed bool) error {
	c := withFirstVersion(r)
	c.History = appendVersion(c.History, terminalVersion(StatusCancelled, ""))
	c.Version = c.History.Current()
	c.Status = StatusCancelled
	c.ExpiresAt = time.Time{}
	if d.Retention > 0 {
		c.ExpiresAt = c.UpdatedAt.Add(d.Retention)
	}
	item := runItem(c)
	for _, a := range []string{runAttrCancBy, runAttrCancWhy} {
		if v, ok := m[a].(*types.AttributeValueMemberS); ok && v.Value != "" {
			item[a] = v
		}
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(runAttrCancelledUnwritten))).Build()
	if err != nil {
		return err
	}
	_, err = d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.Table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			if ccf.Item, err = d.getItem(ctx, r.ID); err != nil {
				return err
			}
		}
		if _, again := ccf.Item[runAttrCancelledUnwritten]; again {
			return fmt.Errorf("host: put cancelled run %s: its cancel's marker changed under the write", r.ID)
		}
		return d.taken(ctx, r, ccf.Item, listed)
	}
	if err != nil {
		return fmt.Errorf("host: put cancelled run: %w", err)
	}
	got, _ := RunFromItem(item)
	return &RunExistsError{Run: got, Listed: listed}
}

// unlistStranger takes r's id off the retries of r.RetryOf, which Create
// listed before finding the id taken by a run that does not retry that
// failed run (taken). One write, on that path only.
func (d *DynamoRuns) unlistStranger(ctx context.Context, r Run) error {
	ex, err := expression.NewBuilder().
		WithUpdate(expression.Delete(expression.Name(runAttrRetries), expression.Value(&types.AttributeValueMemberSS{Value: []string{r.ID}}))).
		WithCondition(expression.AttributeExists(expression.Name(runAttrPK))).Build()
	if err != nil {
		return err
	}
	_, err = d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(d.Table),
		Key:              map[string]types.AttributeValue{runAttrPK: sAV(r.RetryOf)},
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()})
	return conditionalWrite(err, nil, "unlist retry")
}

// CancelledAtCap reports whether r is a retry cancelled because its failed
// run had reached MaxRetries: a run an earlier version of DynamoRuns wrote
// before its listing was refused (it now lists first and writes no such
// run). Such a run is not the answer of the request that wrote it, which
// was refused.
func CancelledAtCap(r Run) bool {
	return r.Status == StatusCancelled && r.CancelReason == retryLimitReason
}

// retryLimitReason is the CancelReason of a retry cancelled because its
// failed run had reached MaxRetries: written by earlier versions of
// DynamoRuns, which wrote a retry's run before its listing and cancelled
// it when the listing was refused (CancelledAtCap).
const retryLimitReason = "the failed run it retries already lists the most retries it can"

// putCause is the cause (idem.TransactOr) of a cancelled completion
// transaction whose run Put (its write 0) for id found id taken: a
// *ScopeHeldError when the item there is a takeover's tombstone (scope is
// the scope item the run was to hold; its holder is read for the error),
// else ErrRunExists. Nil for another write (the retry's link) or when an
// item cannot be read. Two consistent reads, on that path only.
func (d *DynamoRuns) putCause(id, scope string) func(ctx context.Context, index int) error {
	return func(ctx context.Context, index int) error {
		if index != 0 {
			return nil
		}
		it, err := d.getItem(ctx, id)
		if err != nil || it == nil {
			return nil
		}
		if _, ok := it[runAttrTakenOver]; !ok {
			return ErrRunExists
		}
		holder := ""
		if scope != "" {
			if holder, _, err = d.scopeHolder(ctx, scope); err != nil {
				return nil
			}
		}
		return &ScopeHeldError{Holder: holder}
	}
}

// createCause is putCause for r's writes in the completion transaction:
// for write 1, a retry's capped link, a *RetryLimitError when the failed
// run lists MaxRetries others (one consistent read, on that path only).
func (d *DynamoRuns) createCause(r Run, scope string) func(ctx context.Context, index int) error {
	put := d.putCause(r.ID, scope)
	return func(ctx context.Context, index int) error {
		if index != 1 || r.RetryOf == "" {
			return put(ctx, index)
		}
		err := d.atCap(ctx, r.RetryOf, r.ID)
		if !errors.Is(err, ErrRetryLimit) {
			return nil
		}
		return err
	}
}

// atCap is a *RetryLimitError when run failedID lists MaxRetries retries
// or more and not retryID; nil when it lists fewer or retryID, or is
// missing (ErrRunNotFound).
func (d *DynamoRuns) atCap(ctx context.Context, failedID, retryID string) error {
	f, err := d.Get(ctx, failedID)
	if err != nil {
		return err
	}
	if len(f.Retries) >= MaxRetries && !slices.Contains(f.Retries, retryID) {
		return &RetryLimitError{Retries: len(f.Retries)}
	}
	return nil
}

// linkRetryUpdate is LinkRetry's write: ADD retryID to the failed run's
// retries set, on an existing item only; capped, only while the set holds
// fewer than MaxRetries ids or retryID already (Create's link).
func (d *DynamoRuns) linkRetryUpdate(failedID, retryID string, capped bool) (*dynamodb.UpdateItemInput, error) {
	cond := expression.AttributeExists(expression.Name(runAttrPK))
	if capped {
		retries := expression.Name(runAttrRetries)
		cond = cond.And(expression.Or(
			expression.AttributeNotExists(retries),
			retries.Size().LessThan(expression.Value(MaxRetries)),
			expression.Contains(retries, retryID)))
	}
	ex, err := expression.NewBuilder().
		WithUpdate(expression.Add(expression.Name(runAttrRetries), expression.Value(&types.AttributeValueMemberSS{Value: []string{retryID}}))).
		WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &dynamodb.UpdateItemInput{TableName: aws.String(d.Table), Key: map[string]types.AttributeValue{runAttrPK: sAV(failedID)},
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}, nil
}

// LinkRetry implements RunStore: one UpdateItem adding retryID to the
// failed run's retries string set (ADD: idempotent), conditional on the
// run's existence so a vanished run is not recreated as a bare item.
func (d *DynamoRuns) LinkRetry(ctx context.Context, failedID, retryID string) error {
	return d.link(ctx, failedID, retryID, false)
}

// link is LinkRetry, capped (linkRetryUpdate) for Create: a refused capped
// link is told from a missing failed run by reading it (atCap), on that
// path only.
func (d *DynamoRuns) link(ctx context.Context, failedID, retryID string, capped bool) error {
	in, err := d.linkRetryUpdate(failedID, retryID, capped)
	if err != nil {
		return err
	}
	_, err = d.Client.UpdateItem(ctx, in)
	err = conditionalWrite(err, ErrRunNotFound, "link retry")
	if !errors.Is(err, ErrRunNotFound) {
		return err
	}
	if !capped {
		return nil
	}
	switch err := d.atCap(ctx, failedID, retryID); {
	case err == nil:
		// The set shrank between the write and the read: the failed run
		// was removed and written again. Not the cap: retryable.
		return fmt.Errorf("host: link retry: the failed run %s changed under the write", failedID)
	case errors.Is(err, ErrRunNotFound):
		return nil
	default:
		return err
	}
}

// Get implements RunStore (one strongly consistent GetItem): a run past
// its expiry is ErrRunNotFound (gone), as after RunsTable's TTL deleted it.
func (d *DynamoRuns) Get(ctx context.Context, id string) (Run, error) {
	out, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{runAttrPK: sAV(id)},
	})
	if err != nil {
		return Run{}, fmt.Errorf("host: get run: %w", err)
	}
	r, ok := RunFromItem(out.Item)
	if !ok || d.gone(r) {
		return Run{}, ErrRunNotFound
	}
	return r, nil
}

// gone reports whether r, as read from the table, is past its expiry by
// d's clock (RED_TEAM 426): it reads as missing from that second on, as
// MemRuns reads it, though RunsTable's TTL deletes the item only some
// time later (up to days). The clock is read only for an ended run that
// carries an expiry.
func (d *DynamoRuns) gone(r Run) bool {
	if r.ExpiresAt.IsZero() {
		return false
	}
	now := d.Now
	if now == nil {
		now = clock.System{}.Now
	}
	return expired(r, now())
}

// Transition implements RunStore: one UpdateItem conditional on the current
// status (and existence); a terminal one also sets expiresAt under a
// Retention. On a failed condition the old item comes back with
// the error (ALL_OLD), or, where the server does not return it, from a
// consistent GetItem.
func (d *DynamoRuns) Transition(ctx context.Context, id string, from []Status, to Status, errMsg string, now time.Time) (Run, error) {
	return d.transition(ctx, id, from, to, errMsg, "", "", now)
}

// Cancel implements RunStore: Transition's one conditional UpdateItem,
// which also sets cancelledBy and cancelReason.
//
// Without the completion transaction (Transactional false) a retry is
// listed on its failed run before its run is written (Create), so an id
// the failed run lists may hold no run yet, and be written later, when
// its request runs again. A Cancel from pending of an id no run holds
// there writes a marker at the id (cancelUnwritten) and is still
// ErrRunNotFound; that retry's Create honours the marker and writes its
// run cancelled, so a retry cancelled before it existed never starts.
func (d *DynamoRuns) Cancel(ctx context.Context, id string, from []Status, by, reason string, now time.Time) (Run, error) {
	r, err := d.transition(ctx, id, from, StatusCancelled, "", by, reason, now)
	if errors.Is(err, ErrRunNotFound) && !d.Transactional && slices.Contains(from, StatusPending) {
		return d.cancelUnwritten(ctx, id, from, by, reason, now)
	}
	return r, err
}

// cancelUnwritten is Cancel of id where no run is (RED_TEAM 345): a
// PutItem, conditional on no item at id, of a marker holding the
// cancel's by and reason, which no read takes for a run (RunFromItem) and
// which a retry's Create at id honours (writeCancelled); ErrRunNotFound.
// An item found there after all is cancelled as it is if it is a run
// (written since the cancel's first write found none), else left
// (another cancel's marker, a scope takeover's tombstone). One write,
// on the path of a cancel answered 404 only; the marker is kept forever,
// or MarkerRetention after the cancel (RED_TEAM 370).
func (d *DynamoRuns) cancelUnwritten(ctx context.Context, id string, from []Status, by, reason string, now time.Time) (Run, error) {
	if !ValidRunID(id) {
		return Run{}, ErrRunNotFound
	}
	item := map[string]types.AttributeValue{runAttrPK: sAV(id), runAttrTenant: sAV(RunTenant(id)), runAttrCancelledUnwritten: nAV(now.UnixMilli())}
	if by != "" {
		item[runAttrCancBy] = sAV(by)
	}
	if reason != "" {
		item[runAttrCancWhy] = sAV(reason)
	}
	if at := expiry(d.MarkerRetention, now); !at.IsZero() {
		item[attrExpiresAt] = nAV(at.Unix())
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(runAttrPK))).Build()
	if err != nil {
		return Run{}, err
	}
	_, err = d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(d.Table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		if r, ok := RunFromItem(ccf.Item); len(ccf.Item) > 0 && (!ok || d.gone(r)) {
			return Run{}, ErrRunNotFound
		}
		return d.transition(ctx, id, from, StatusCancelled, "", by, reason, now)
	case err != nil:
		return Run{}, fmt.Errorf("host: cancel unwritten run: %w", err)
	}
	return Run{}, ErrRunNotFound
}

// Finish implements RunStore: Transition's one conditional UpdateItem from
// running, its condition also naming the claim epoch (claimEpoch = epoch).
func (d *DynamoRuns) Finish(ctx context.Context, id string, epoch int64, to Status, errMsg string, now time.Time) (Run, error) {
	if err := checkFinish(to); err != nil {
		return Run{}, err
	}
	return d.transitionIf(ctx, id, []Status{StatusRunning}, epochIs(epoch), to, errMsg, "", "", now)
}

// transition is Transition, setting cancelledBy to by and cancelReason to
// reason when they are set.
func (d *DynamoRuns) transition(ctx context.Context, id string, from []Status, to Status, errMsg, by, reason string, now time.Time) (Run, error) {
	return d.transitionIf(ctx, id, from, expression.ConditionBuilder{}, to, errMsg, by, reason, now)
}

// transitionIf is transition whose condition also requires also, when it
// is set (Finish: the run's claim epoch).
func (d *DynamoRuns) transitionIf(ctx context.Context, id string, from []Status, also expression.ConditionBuilder, to Status, errMsg, by, reason string, now time.Time) (Run, error) {
	if len(from) == 0 {
		return Run{}, errors.New("host: Transition needs at least one from status")
	}
	ops := make([]expression.OperandBuilder, 0, len(from))
	for _, s := range from {
		ops = append(ops, expression.Value(string(s)))
	}
	var in expression.ConditionBuilder
	if len(ops) == 1 {
		in = expression.Name(runAttrStatus).Equal(ops[0])
	} else {
		in = expression.Name(runAttrStatus).In(ops[0], ops[1:]...)
	}
	cond := expression.AttributeExists(expression.Name(runAttrPK)).And(in)
	if also.IsSet() {
		cond = cond.And(also)
	}
	upd := expression.Set(expression.Name(runAttrStatus), expression.Value(string(to))).
		Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli()))
	if errMsg != "" {
		upd = upd.Set(expression.Name(runAttrError), expression.Value(errMsg))
	}
	if by != "" {
		upd = upd.Set(expression.Name(runAttrCancBy), expression.Value(by))
	}
	if reason != "" {
		upd = upd.Set(expression.Name(runAttrCancWhy), expression.Value(reason))
	}
	if to == StatusRunning {
		upd = upd.Add(expression.Name(runAttrEpoch), expression.Value(1))
	}
	if to.Terminal() {
		upd = upd.Remove(expression.Name(runAttrLive)).Remove(expression.Name(runAttrWake)).Remove(expression.Name(runAttrWakeAt)).
			Remove(expression.Name(runAttrWakeN)).Remove(expression.Name(runAttrWakeMax)).Remove(expression.Name(runAttrWakeDL))
	}
	upd = newVersion(upd, terminalVersion(to, errMsg))
	if to.Terminal() {
		upd = setExpiry(upd, d.Retention, now)
	}
	return d.updateRun(ctx, id, cond, upd, "update run")
}

// NoteFailure implements RunStore: one UpdateItem (ADD failures 1, SET
// lastError, updatedAt and a token of this call) conditional on the run
// existing, live, and not holding this call's token, returning the new
// count (UPDATED_NEW). The token makes the count exact when the engine
// applies the write and its answer is lost: the SDK's retry is refused,
// and one consistent read finds the token and answers the count the
// first write made, so a try is never counted twice; when every answer of
// the call was lost (the SDK gave up), the same read on that error path
// (readBack) answers the count a landed write made (RED_TEAM 520).
func (d *DynamoRuns) NoteFailure(ctx context.Context, id, errMsg string, now time.Time) (int, error) {
	if errMsg == "" {
		errMsg = "(no message)"
	}
	tok := callToken()
	upd := expression.Add(expression.Name(runAttrFails), expression.Value(1)).
		Set(expression.Name(runAttrLastErr), expression.Value(errMsg)).
		Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())).
		Set(expression.Name(runAttrFailTok), expression.Value(tok))
	upd = newVersion(upd, version(fieldLastError, errMsg))
	live := expression.Name(runAttrStatus).In(expression.Value(string(StatusPending)), expression.Value(string(StatusRunning)))
	cond := expression.AttributeExists(expression.Name(runAttrPK)).And(live, notThisCall(runAttrFailTok, tok))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return 0, err
	}
	out, err := d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.Table), Key: map[string]types.AttributeValue{runAttrPK: sAV(id)},
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Rare path, one read: this call's own write whose answer was lost
		// (its token is there), no run, or a run already ended.
		got, gerr := d.Client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(d.Table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{runAttrPK: sAV(id)},
		})
		if gerr != nil {
			return 0, fmt.Errorf("host: get run: %w", gerr)
		}
		if holdsToken(got.Item, runAttrFailTok, tok) {
			if n, ok := got.Item[runAttrFails].(*types.AttributeValueMemberN); ok {
				return strconv.Atoi(n.Value)
			}
		}
		if _, ok := RunFromItem(got.Item); !ok {
			return 0, ErrRunNotFound
		}
		return 0, ErrStatusConflict
	}
	if err != nil {
		// Landed, every answer lost: the count it made (RED_TEAM 520).
		if item := d.readBack(ctx, err, id, runAttrFailTok, tok); item != nil {
			if n, ok := item[runAttrFails].(*types.AttributeValueMemberN); ok {
				return strconv.Atoi(n.Value)
			}
		}
		return 0, fmt.Errorf("host: note run failure: %w", err)
	}
	n, ok := out.Attributes[runAttrFails].(*types.AttributeValueMemberN)
	if !ok {
		return 0, errors.New("host: note run failure: no count returned")
	}
	return strconv.Atoi(n.Value)
}

// callToken returns 96 random bits, base64url: the token of one write
// call (NoteFailure's failTok, updateRun's writeTok).
func callToken() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic("host: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Schedule implements RunStore: one UpdateItem (SET wakeShard, wakeAt,
// wakeAttempt, wakeMaxAttempts, wakeDeadline, updatedAt, and writeTok, a
// token of this call) conditional on the run being pending or running and
// not holding that token: a write whose answer was lost is applied once,
// its SDK retry refused and recognised by the token (RED_TEAM 500), as
// updateRun's are, and one whose every answer was lost is read back on
// that error path (readBack, RED_TEAM 520).
func (d *DynamoRuns) Schedule(ctx context.Context, id string, w Wake, now time.Time) error {
	tok := callToken()
	upd := scheduleUpdate(w, now).Set(expression.Name(runAttrWriteTok), expression.Value(tok))
	live := expression.Name(runAttrStatus).In(expression.Value(string(StatusPending)), expression.Value(string(StatusRunning)))
	cond := expression.AttributeExists(expression.Name(runAttrPK)).And(live, notThisCall(runAttrWriteTok, tok))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	_, err = d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.Table), Key: map[string]types.AttributeValue{runAttrPK: sAV(id)},
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Rare path, one read (as before): this call's own write, landed
		// with its answer lost, no run, or a run no longer live.
		item, gerr := d.getItem(ctx, id)
		if gerr != nil {
			return gerr
		}
		r, ok := RunFromItem(item)
		switch {
		case ok && holdsToken(item, runAttrWriteTok, tok):
			return nil
		case !ok || d.gone(r):
			return ErrRunNotFound
		}
		return ErrStatusConflict
	}
	if err != nil {
		if d.readBack(ctx, err, id, runAttrWriteTok, tok) != nil {
			return nil // landed, every answer lost (RED_TEAM 520)
		}
		return fmt.Errorf("host: schedule run: %w", err)
	}
	return nil
}

// Park implements RunStore: Schedule's one UpdateItem, conditional on the
// run being running under claimEpoch = epoch; the run comes back (ALL_NEW,
// or as it is with ErrStatusConflict).
func (d *DynamoRuns) Park(ctx context.Context, id string, epoch int64, w Wake, now time.Time) (Run, error) {
	cond := expression.AttributeExists(expression.Name(runAttrPK)).
		And(expression.Name(runAttrStatus).Equal(expression.Value(string(StatusRunning)))).And(epochIs(epoch))
	cur, err := d.updateRun(ctx, id, cond, scheduleUpdate(w, now), "park run")
	if errors.Is(err, ErrStatusConflict) && releasable(cur, epoch) {
		return d.releasePause(ctx, id, cur, epoch, now)
	}
	return cur, err
}

// scheduleUpdate is the write of Schedule and Park: the wake attributes
// (wakeShard among them, so the byWake index lists the run), updatedAt and
// a new version logging the wake. It removes liveShard: a parked run is
// Due's, not Stale's (Resume writes it back), so parked runs, which
// Claim refuses, never fill a stale-run pass's page ahead of the stranded
// runs it is for (RED_TEAM 485).
func scheduleUpdate(w Wake, now time.Time) expression.UpdateBuilder {
	upd := expression.Set(expression.Name(runAttrWake), expression.Value(wakeShard)).
		Remove(expression.Name(runAttrLive)).
		Set(expression.Name(runAttrWakeAt), expression.Value(w.At.UnixMilli())).
		Set(expression.Name(runAttrWakeN), expression.Value(w.Attempt)).
		Set(expression.Name(runAttrWakeMax), expression.Value(w.MaxAttempts)).
		Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli()))
	if w.Deadline.IsZero() {
		upd = upd.Remove(expression.Name(runAttrWakeDL))
	} else {
		upd = upd.Set(expression.Name(runAttrWakeDL), expression.Value(w.Deadline.UnixMilli()))
	}
	logged := w
	logged.At, logged.Deadline = w.At.UTC().Truncate(time.Millisecond), w.Deadline.UTC().Truncate(time.Millisecond)
	return newVersion(upd, version(fieldWake, logged))
}

// QueryAPI is the Query operation of *dynamodb.Client, used by Due.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Due implements RunStore: one Query of the byWake index (wakeShard = "due"
// AND wakeAt <= now), earliest first. Client must also implement QueryAPI
// (a *dynamodb.Client does).
func (d *DynamoRuns) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	q, ok := d.Client.(QueryAPI)
	if !ok {
		return nil, errors.New("host: the runs client cannot Query")
	}
	kc := expression.Key(runAttrWake).Equal(expression.Value(wakeShard)).
		And(expression.Key(runAttrWakeAt).LessThanEqual(expression.Value(now.UnixMilli())))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(d.Table), IndexName: aws.String(indexByWake),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	out, err := q.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("host: due runs: %w", err)
	}
	ids := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if v, ok := it[runAttrPK].(*types.AttributeValueMemberS); ok {
			ids = append(ids, v.Value)
		}
	}
	return ids, nil
}

// updateRun is the one conditional UpdateItem of a run's transitions
// (Transition, AppendLog, Claim, Cancel, Finish, Breach, Park, Resume,
// Pause, ...): upd applied when cond holds, the run after it returned
// (ALL_NEW). The write also sets writeTok to a token of this call, and
// its condition also requires the item not to hold that token already
// (RED_TEAM 500): a write the engine applied whose answer was lost (a
// connection reset, a timeout after the write) is sent again by the SDK,
// and that retry, which would fail its own condition (the run moved on by
// the write itself) or apply the write a second time, is refused; the item
// the failed condition returns holds this call's token, and the call is
// answered with it as the write left it, as its lost answer would have
// been. When cond does not hold it returns the run as it is with
// ErrStatusConflict: the item the failed condition returned (ALL_OLD),
// or, on an engine that returns none, a consistent read (on that path
// only, as before; none where ReturnsOldOnConditionFailure says no item
// returned is no item); ErrRunNotFound when there is no run, or that run is
// past its expiry (gone). No round trip is added. When the call ends in
// another error (the SDK gave up: every try's answer lost, or lost and
// then throttled), the run is read back on that path only (readBack,
// RED_TEAM 520): an item holding this call's token is the write landed,
// answered as written; else the error stands. what names the write in
// other errors.
func (d *DynamoRuns) updateRun(ctx context.Context, id string, cond expression.ConditionBuilder, upd expression.UpdateBuilder, what string) (Run, error) {
	tok := callToken()
	upd = upd.Set(expression.Name(runAttrWriteTok), expression.Value(tok))
	cond = cond.And(notThisCall(runAttrWriteTok, tok))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return Run{}, err
	}
	out, err := d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.Table), Key: map[string]types.AttributeValue{runAttrPK: sAV(id)},
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		item := ccf.Item
		if len(item) == 0 && !d.ReturnsOldOnConditionFailure {
			if item, err = d.getItem(ctx, id); err != nil {
				return Run{}, err
			}
		}
		cur, ok := RunFromItem(item)
		switch {
		case ok && holdsToken(item, runAttrWriteTok, tok):
			// This call's own write, landed, its answer lost.
			return cur, nil
		case !ok || d.gone(cur):
			return Run{}, ErrRunNotFound
		}
		return cur, ErrStatusConflict
	}
	if err != nil {
		if item := d.readBack(ctx, err, id, runAttrWriteTok, tok); item != nil {
			if cur, ok := RunFromItem(item); ok {
				// This call's own write, landed, every answer lost.
				return cur, nil
			}
		}
		return Run{}, fmt.Errorf("host: %s: %w", what, err)
	}
	r, _ := RunFromItem(out.Attributes)
	return r, nil
}

// readBack is the fate of a write whose call ended in an error that is no
// failed condition (RED_TEAM 520): the SDK gave up, every try's answer
// lost or refused (a connection reset after the write, then throttling or
// timeouts until its last try), so the write may have landed with no try
// of the call told. One consistent GetItem of run id, on that error path
// only: the item when it holds tok, this call's token, in attr (the write
// landed; no write of the run came after it), else nil (it did not land,
// or another write came after it, or the read failed too, or ctx is
// done, the request's own time out: nothing can be read with it). A nil
// leaves the call's error as it was: its fate unknown, never a conflict.
// An error by which the engine refused the request itself (refused) is
// not read back: no try of it applied.
func (d *DynamoRuns) readBack(ctx context.Context, err error, id, attr, tok string) map[string]types.AttributeValue {
	if ctx.Err() != nil || refused(err) {
		return nil
	}
	item, err := d.getItem(ctx, id)
	if err != nil || !holdsToken(item, attr, tok) {
		return nil
	}
	return item
}

// refused reports whether err is the engine's refusal of the request as
// such (a ValidationException: an item over the size limit, an
// expression it does not accept; a ResourceNotFoundException), which
// every try of it met: no try applied, and there is nothing to read back
// (an item near the size limit would cost up to 100 read units).
func refused(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ValidationException", "ResourceNotFoundException":
		return true
	}
	return false
}

// notThisCall is the condition that attribute attr does not hold tok, the
// token of the call writing it: true of every item but the one that
// call's own write, landed, left.
func notThisCall(attr, tok string) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(attr)).Or(expression.Name(attr).NotEqual(expression.Value(tok)))
}

// holdsToken reports whether item's attribute attr holds tok.
func holdsToken(item map[string]types.AttributeValue, attr, tok string) bool {
	t, ok := item[attr].(*types.AttributeValueMemberS)
	return ok && t.Value == tok
}
