package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/keyspace"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/storeconfig"
)

// API is the subset of *dynamodb.Client the store uses.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Config configures a Store. Validated by New.
type Config struct {
	// Client is the DynamoDB client. Required. Its retry policy is used as
	// is: SDK retries never cause a second execution (see the package doc).
	Client API
	// Table is the name of the table created from template.yaml's
	// IdempotencyTable (partition key pk S, TTL attribute expiresAt).
	// Required.
	Table string
}

// Store is the DynamoDB idem.Store. It is safe for concurrent use and holds
// no state besides its configuration.
//
// Errors of calls that could not use DynamoDB — throttled, a 5xx, a
// connection refused or lost, no answer within the context's deadline —
// match idem.ErrStoreUnavailable (errors.Is), so the Guard answers them
// 503 with Retry-After; the SDK's own error stays in the chain.
type Store struct {
	c     API
	table *string
}

var _ idem.Store = (*Store)(nil)

// ErrNoTransactions is returned by Complete when Outcome.Writes is not empty
// and the endpoint does not implement TransactWriteItems (dynalite). Nothing
// was written: the store never falls back to non-atomic writes. It matches
// idem.ErrUnsupportedWrite too.
var ErrNoTransactions = fmt.Errorf("%w: dynamostore: the DynamoDB endpoint does not support transactions", idem.ErrUnsupportedWrite)

// ErrContention is returned by Claim when the record changed under it more
// than maxClaimRounds times in a row (never observed; a safety bound).
var ErrContention = errors.New("dynamostore: claim did not settle under contention")

const maxClaimRounds = 8

// ErrConfig is matched (errors.Is) by every error New returns for an
// invalid Config; the error lists every missing field.
var ErrConfig = errors.New("dynamostore: invalid config")

// New returns a Store for cfg, or an error naming every missing field
// (matching ErrConfig).
func New(cfg Config) (*Store, error) {
	if err := storeconfig.Check("dynamostore", ErrConfig, cfg.Client, cfg.Table); err != nil {
		return nil, err
	}
	return &Store{c: classified{c: cfg.Client, table: cfg.Table}, table: aws.String(cfg.Table)}, nil
}

// Conditions. Expiry is part of every one of them: DynamoDB TTL deletes
// lazily, so an expired item may still be there.

func notExpired(nowMs int64) expression.ConditionBuilder {
	return expression.Or(
		expression.AttributeNotExists(expression.Name(attrExpMs)),
		expression.Name(attrExpMs).GreaterThan(expression.Value(nowMs)))
}

// owned: the live pending record of owner. Every write after the claim uses
// it, so a stale owner (reclaimed, completed, deleted, expired) writes nothing.
func owned(owner string, nowMs int64) expression.ConditionBuilder {
	return expression.And(
		expression.Name(attrOwner).Equal(expression.Value(owner)),
		expression.Name(attrState).Equal(expression.Value(string(idem.StatePending))),
		notExpired(nowMs))
}

// reclaimable: the exact record old (owner, attempt and state unchanged:
// compare-and-set), live, same digest, and retryable or lease-expired.
func reclaimable(old idem.Record, digest string, nowMs int64) expression.ConditionBuilder {
	return expression.And(
		expression.Name(attrOwner).Equal(expression.Value(old.Owner)),
		expression.Name(attrAttempt).Equal(expression.Value(old.Attempt)),
		expression.Name(attrState).Equal(expression.Value(string(old.State))),
		expression.Name(attrDigest).Equal(expression.Value(digest)),
		notExpired(nowMs),
		expression.Or(
			expression.Name(attrState).Equal(expression.Value(string(idem.StateRetryableFailure))),
			expression.And(
				expression.Name(attrState).Equal(expression.Value(string(idem.StatePending))),
				expression.Name(attrLease).LessThanEqual(expression.Value(nowMs)))))
}

func setExpiry(u expression.UpdateBuilder, expires time.Time) expression.UpdateBuilder {
	if expires.IsZero() {
		return u.Remove(expression.Name(attrExpMs)).Remove(expression.Name(attrTTL))
	}
	return u.Set(expression.Name(attrExpMs), expression.Value(expires.UnixMilli())).
		Set(expression.Name(attrTTL), expression.Value(ttlSeconds(expires)))
}

func removeResponse(u expression.UpdateBuilder) expression.UpdateBuilder {
	for _, a := range responseAttrs {
		u = u.Remove(expression.Name(a))
	}
	return u
}

func (s *Store) key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: avS(id)}
}

// conditionFailed returns the ConditionalCheckFailedException in err, if any.
func conditionFailed(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf, true
	}
	return nil, false
}

// current returns the record item that made a conditional write fail: the
// ALL_OLD item the server returned, or, where the server does not return it
// (dynalite, older DynamoDB Local), a strongly consistent read.
func (s *Store) current(ctx context.Context, id string, returned map[string]types.AttributeValue) (stored, bool, error) {
	if len(returned) > 0 {
		st, ok := decode(returned)
		return st, ok, nil
	}
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: s.key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return stored{}, false, fmt.Errorf("dynamostore: GetItem: %w", err)
	}
	st, ok := decode(out.Item)
	return st, ok, nil
}

// Claim implements idem.Store.
//
// A fresh claim is one PutItem conditional on the record being absent or
// expired. When it fails, the server returns the existing item
// (ReturnValuesOnConditionCheckFailure=ALL_OLD) and Claim decides from it:
// a replay or an in-flight answer therefore costs one round trip (two where
// the server does not return the item: a consistent GetItem follows). A
// reclaimable record is taken over with an UpdateItem compare-and-set on its
// owner, attempt and state.
//
// rec.Owner must be unique to this Claim call: if the SDK re-sends a write
// whose first attempt was applied but whose response was lost, Claim
// recognises its own owner token in the stored record and reports the claim
// as won, never as a duplicate (a reclaim of an expired lease with
// LeaseExpired set, as when its first answer arrives).
func (s *Store) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	if !keyspace.IsCaller(rec.ID) || rec.Digest == "" || rec.Owner == "" || rec.State != idem.StatePending {
		return idem.ClaimResult{}, fmt.Errorf("%w: id %s (a caller ID: %t), state %q, owner/digest set: %t/%t",
			idem.ErrInvalidRecord, logID(rec.ID), keyspace.IsCaller(rec.ID), rec.State, rec.Owner != "", rec.Digest != "")
	}
	rec.Response = nil
	// The raw body's hash is written by the write that ends the attempt
	// (Complete, Release), never by the claim: the pending item carries
	// none, and a reclaim keeps the previous attempt's.
	rec.RawBodySHA256 = ""
	rec.LeaseExpires = msec(rec.LeaseExpires)
	rec.Renewed = msec(now)
	rec.Expires = msec(rec.Expires)
	nowMs := now.UnixMilli()

	var cur *observed // nil: no live record known, try a fresh claim
	for round := 0; round < maxClaimRounds; round++ {
		if cur == nil {
			st, found, err := s.putFresh(ctx, rec, nowMs)
			if err != nil {
				return idem.ClaimResult{}, err
			}
			if !found {
				r := rec
				r.Attempt = 1
				return idem.ClaimResult{Decision: idem.Claimed, Record: r}, nil
			}
			if cur = st; cur == nil {
				continue // vanished between the write and the read
			}
		}
		if cur.rec.Expired(now) {
			cur = nil // read before an expired item was replaced; try again
			continue
		}
		if cur.own {
			return s.ownClaim(cur.stored), nil
		}
		if !cur.rec.Reclaimable(rec.Digest, now) {
			return s.exists(ctx, cur.stored, rec.Digest)
		}
		st, won, err := s.reclaim(ctx, rec, cur.rec, nowMs)
		if err != nil {
			return idem.ClaimResult{}, err
		}
		if won {
			r := rec
			r.Attempt = cur.rec.Attempt + 1
			r.RequestID = cur.rec.RequestID
			r.RawBodySHA256 = cur.rec.RawBodySHA256
			return idem.ClaimResult{Decision: idem.Reclaimed, Record: r, LeaseExpired: cur.rec.State == idem.StatePending}, nil
		}
		if st != nil && st.own {
			// This reclaim, applied with its answer lost (the SDK's
			// retry failed the condition against it): won, over the
			// record read before, whose lease it took over when that
			// was pending, as when the first answer arrives.
			res := s.ownClaim(st.stored)
			res.LeaseExpired = cur.rec.State == idem.StatePending
			return res, nil
		}
		cur = st // lost the compare-and-set: decide again on what is there now
	}
	return idem.ClaimResult{}, ErrContention
}

// observed is a record read after a failed conditional write; own is true
// when it carries this call's owner token and the call's request was sent
// more than once (the SDK retried a write that had been applied).
type observed struct {
	stored
	own bool
}

func (s *Store) ownClaim(st stored) idem.ClaimResult {
	d := idem.Reclaimed
	if st.rec.Attempt <= 1 {
		d = idem.Claimed
	}
	return idem.ClaimResult{Decision: d, Record: st.rec}
}

// exists is the Exists answer for the live record st. Its response is read
// only when the claim's digest is the record's (a replay); a mismatch is
// answered without it, so it costs no read of a response stored beside the
// record.
func (s *Store) exists(ctx context.Context, st stored, digest string) (idem.ClaimResult, error) {
	if st.rec.Digest != digest {
		rec := st.rec
		rec.Response = nil
		return idem.ClaimResult{Decision: idem.Exists, Record: rec}, nil
	}
	rec, err := s.withResponse(ctx, st)
	if errors.Is(err, idem.ErrNotKept) {
		// The response is gone: the record, without it, names the first
		// request for the answer.
		rec = st.rec
		rec.Response = nil
		return idem.ClaimResult{Decision: idem.Exists, Record: rec}, err
	}
	if err != nil {
		return idem.ClaimResult{}, err
	}
	return idem.ClaimResult{Decision: idem.Exists, Record: rec}, nil
}

// putFresh writes rec as a new pending record if none is live. found is
// false when the write succeeded; otherwise the live record is returned
// (nil when it vanished between the write and the read).
func (s *Store) putFresh(ctx context.Context, rec idem.Record, nowMs int64) (*observed, bool, error) {
	var sent sendCount
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                pendingItem(rec),
		ConditionExpression:                 condFresh,
		ExpressionAttributeNames:            namesFresh,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":n": avN(nowMs)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, sent.option)
	item, failed, err := conditionItem(err, "claim PutItem")
	if !failed {
		return nil, false, err
	}
	return s.observe(ctx, rec, item, &sent)
}

func (s *Store) observe(ctx context.Context, rec idem.Record, returned map[string]types.AttributeValue, sent *sendCount) (*observed, bool, error) {
	st, ok, err := s.current(ctx, rec.ID, returned)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, true, nil
	}
	o := &observed{stored: st}
	o.own = sent.retried() && st.rec.Owner == rec.Owner && st.rec.State == idem.StatePending && st.rec.Digest == rec.Digest
	return o, true, nil
}

// reclaim takes over old with a compare-and-set. won reports success; when
// lost, the record now stored is returned (nil if it vanished).
func (s *Store) reclaim(ctx context.Context, rec, old idem.Record, nowMs int64) (*observed, bool, error) {
	u := expression.Set(expression.Name(attrOwner), expression.Value(rec.Owner)).
		Set(expression.Name(attrState), expression.Value(string(idem.StatePending))).
		Set(expression.Name(attrLease), expression.Value(rec.LeaseExpires.UnixMilli())).
		Set(expression.Name(attrRenewed), expression.Value(rec.Renewed.UnixMilli())).
		Set(expression.Name(attrAttempt), expression.Value(old.Attempt+1))
	u = removeResponse(setExpiry(u, rec.Expires))
	expr, err := expression.NewBuilder().WithCondition(reclaimable(old, rec.Digest, nowMs)).WithUpdate(u).Build()
	if err != nil {
		return nil, false, err
	}
	var sent sendCount
	item, failed, err := s.updateIf(ctx, "reclaim UpdateItem", exprOf(expr).conditional(s.table, s.key(rec.ID)), &sent)
	if !failed {
		return nil, err == nil, err
	}
	o, found, err := s.observe(ctx, rec, item, &sent)
	if err != nil || !found {
		return nil, false, err
	}
	return o, false, nil
}

// Complete implements idem.Store. The completed record is written whole:
// without Outcome.Writes it is one PutItem of the completed item (built
// from claim and out) conditional on ownership, the same fence as every
// write after the claim (owner token, pending, not expired); with them, one
// TransactWriteItems holding that conditional Put and the writes
// (ErrNoTransactions where the endpoint has none). A response whose
// stored form (encoded, deflated when that helps) does not fit in the
// record item's 1 KB beside the record's own attributes (about 600 bytes)
// is first written as chunk items of up to 350 KB under a key unique to
// this completion, then referenced by the fenced write; if the fence fails,
// the transaction is cancelled, or the write is refused as a request (a
// ValidationException), the chunks are deleted (best effort; they also
// carry the record's TTL).
// A chunk write that fails (throttled past the SDK's retries, say) fails
// the completion before its write of the record, or its transaction, is
// sent: the error matches idem.ErrRecordNotSent beside its cause.
func (s *Store) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if err := out.Validate(); err != nil {
		return err
	}
	writes, err := transactItems(out.Writes)
	if err != nil {
		return err
	}
	id, owner := claim.ID, claim.Owner
	if !keyspace.IsCaller(id) || owner == "" {
		return idem.ErrFenced
	}
	if err := claim.ValidateClaim(); err != nil {
		return err
	}
	expires := msec(out.Expires)

	var ref *responseRef
	if out.State.Final() {
		ref, err = s.storeResponse(ctx, claim, out.State, out.Response, expires)
		if err != nil {
			return err
		}
	}
	mine := func(st stored) bool {
		if st.rec.Owner != owner || st.rec.State != out.State {
			return false
		}
		return ref == nil || ref.matches(st)
	}
	put := &types.Put{
		TableName:                           s.table,
		Item:                                completedItem(claim, out.State, expires, ref),
		ConditionExpression:                 condOwned,
		ExpressionAttributeNames:            namesOwned,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":o": avS(owner), ":p": avPending, ":n": avN(now.UnixMilli())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	var sent sendCount
	if len(writes) == 0 {
		_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: put.TableName, Item: put.Item,
			ConditionExpression: put.ConditionExpression, ExpressionAttributeNames: put.ExpressionAttributeNames,
			ExpressionAttributeValues: put.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: put.ReturnValuesOnConditionCheckFailure,
		}, sent.option)
		item, failed, cerr := conditionItem(err, "complete PutItem")
		if !failed {
			if cerr != nil && refusedOnlySend(err, &sent) {
				s.dropChunks(ctx, id, ref)
			}
			return cerr
		}
		return s.fenceFailed(ctx, id, item, &sent, mine, ref)
	}

	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	items = append(items, types.TransactWriteItem{Put: put})
	items = append(items, writes...)
	_, err = s.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, sent.option)
	if err == nil {
		return nil
	}
	if isUnsupported(err) {
		s.dropChunks(ctx, id, ref)
		return fmt.Errorf("%w (%v)", ErrNoTransactions, err)
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		if refusedOnlySend(err, &sent) {
			s.dropChunks(ctx, id, ref)
		}
		return fmt.Errorf("dynamostore: complete TransactWriteItems: %w", err)
	}
	reasons := tce.CancellationReasons
	if len(reasons) != len(items) {
		// Not one reason per item, as DynamoDB gives them: which item
		// failed cannot be told, the record's fence included. A failed
		// condition is a write conflict naming no write (released by the
		// Guard, fenced, so a completion that landed is kept), unless a
		// retry found this completion's own earlier try applied.
		for _, r := range reasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				if sent.retried() {
					st, ok, cerr := s.current(ctx, id, nil)
					if cerr != nil {
						// Whether the earlier try applied this
						// completion cannot be told: its chunk
						// items stay (the record may reference
						// them) and the outcome is unknown.
						return cerr
					}
					if ok && mine(st) {
						return nil
					}
				}
				s.dropChunks(ctx, id, ref)
				return &idem.WriteConflictError{Index: -1, Err: err}
			}
		}
		return s.cancelled(ctx, id, ref, &sent, err)
	}
	if aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
		return s.fenceFailed(ctx, id, reasons[0].Item, &sent, mine, ref)
	}
	for i, r := range reasons[1:] {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			// reasons are by item, the record's Put first: writes[i]
			// is reasons[i+1].
			s.dropChunks(ctx, id, ref)
			return &idem.WriteConflictError{Index: i, Err: err}
		}
	}
	return s.cancelled(ctx, id, ref, &sent, err)
}

// cancelled is the error of a completion transaction cancelled for no
// failed condition (a conflicting transaction, throttling, a validation
// error). A cancelled send applied nothing: when it was the call's only
// send, the chunk items written for the response are deleted, referenced
// by nothing, as a fenced completion's are (under a retention of forever
// they carry no TTL, and stayed for good: RED_TEAM 548). After an SDK
// retry an earlier send may have applied the completion, so they stay.
func (s *Store) cancelled(ctx context.Context, id string, ref *responseRef, sent *sendCount, err error) error {
	if !sent.retried() {
		s.dropChunks(ctx, id, ref)
	}
	return fmt.Errorf("dynamostore: complete TransactWriteItems: %w", err)
}

// fenceFailed classifies a failed owner-conditioned write: the caller's own
// write already applied by an earlier attempt of this call (success), or a
// fence (ErrFenced).
func (s *Store) fenceFailed(ctx context.Context, id string, returned map[string]types.AttributeValue, sent *sendCount, mine func(stored) bool, ref *responseRef) error {
	if sent.retried() {
		st, ok, err := s.current(ctx, id, returned)
		if err != nil {
			return err
		}
		if ok && mine(st) {
			return nil
		}
	}
	s.dropChunks(ctx, id, ref)
	return idem.ErrFenced
}

func transactItems(ws []any) ([]types.TransactWriteItem, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	out := make([]types.TransactWriteItem, 0, len(ws))
	for _, w := range ws {
		switch w := w.(type) {
		case types.TransactWriteItem:
			out = append(out, w)
		case *types.TransactWriteItem:
			if w == nil {
				return nil, fmt.Errorf("%w: nil *types.TransactWriteItem", idem.ErrUnsupportedWrite)
			}
			out = append(out, *w)
		default:
			return nil, fmt.Errorf("%w: %T (dynamostore takes types.TransactWriteItem)", idem.ErrUnsupportedWrite, w)
		}
	}
	if len(out)+1 > 100 {
		return nil, fmt.Errorf("%w: %d writes (a transaction holds at most 99 besides the record)", idem.ErrUnsupportedWrite, len(out))
	}
	return out, nil
}

// Release implements idem.Store: one UpdateItem conditional on ownership,
// setting the released attempt's raw body hash (removing the attribute
// when claim carries none).
func (s *Store) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	id, owner, raw := claim.ID, claim.Owner, claim.RawBodySHA256
	u := removeResponse(expression.Set(expression.Name(attrState), expression.Value(string(idem.StateRetryableFailure))).
		Remove(expression.Name(attrLease)).Remove(expression.Name(attrRenewed)))
	if raw != "" {
		u = u.Set(expression.Name(attrRawBody), expression.Value(raw))
	} else {
		u = u.Remove(expression.Name(attrRawBody))
	}
	return s.ownedUpdate(ctx, "release", id, owner, now, u, func(st stored) bool {
		return st.rec.Owner == owner && st.rec.State == idem.StateRetryableFailure && st.rec.RawBodySHA256 == raw
	})
}

// Renew implements idem.Store: one UpdateItem conditional on ownership.
func (s *Store) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	lease := msec(leaseExpires).UnixMilli()
	u := expression.Set(expression.Name(attrLease), expression.Value(lease)).
		Set(expression.Name(attrRenewed), expression.Value(now.UnixMilli()))
	return s.ownedUpdate(ctx, "renew", id, owner, now, u, func(stored) bool {
		// An applied renew leaves the record owned and pending, so its
		// retry succeeds by itself; a failure is a real fence.
		return false
	})
}

func (s *Store) ownedUpdate(ctx context.Context, what, id, owner string, now time.Time, u expression.UpdateBuilder, mine func(stored) bool) error {
	expr, err := ownedExpr(id, owner, now, &u)
	if err != nil {
		return err
	}
	var sent sendCount
	item, failed, err := s.updateIf(ctx, what+" UpdateItem", exprOf(expr).conditional(s.table, s.key(id)), &sent)
	if !failed {
		return err
	}
	return s.fenceFailed(ctx, id, item, &sent, mine, nil)
}

// updateIf sends the conditional update u as one UpdateItem counted by sent
// and sorts its answer with conditionItem (errors wrapped with what).
func (s *Store) updateIf(ctx context.Context, what string, u *types.Update, sent *sendCount) (item map[string]types.AttributeValue, failed bool, _ error) {
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key,
		ConditionExpression: u.ConditionExpression, UpdateExpression: u.UpdateExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure,
	}, sent.option)
	return conditionItem(err, what)
}

// ownedExpr builds the ownership condition of a write to id by owner (with
// the update u, if any); a non-caller id or an empty owner is ErrFenced.
func ownedExpr(id, owner string, now time.Time, u *expression.UpdateBuilder) (expression.Expression, error) {
	if !keyspace.IsCaller(id) || owner == "" {
		return expression.Expression{}, idem.ErrFenced
	}
	b := expression.NewBuilder().WithCondition(owned(owner, now.UnixMilli()))
	if u != nil {
		b = b.WithUpdate(*u)
	}
	return b.Build()
}

// conditionItem sorts the answer of a conditional write: failed is true
// when the condition failed (item is what the server returned, possibly
// nothing); otherwise err is nil on success or the error, wrapped with what.
func conditionItem(err error, what string) (item map[string]types.AttributeValue, failed bool, _ error) {
	if err == nil {
		return nil, false, nil
	}
	ccf, ok := conditionFailed(err)
	if !ok {
		return nil, false, fmt.Errorf("dynamostore: %s: %w", what, err)
	}
	return ccf.Item, true, nil
}

// Delete implements idem.Store: one DeleteItem conditional on ownership.
// A pending record has no response chunks, so none are left behind.
func (s *Store) Delete(ctx context.Context, id, owner string, now time.Time) error {
	expr, err := ownedExpr(id, owner, now, nil)
	if err != nil {
		return err
	}
	var sent sendCount
	_, err = s.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           s.table,
		Key:                                 s.key(id),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, sent.option)
	item, failed, err := conditionItem(err, "DeleteItem")
	if !failed {
		return err
	}
	if sent.retried() && len(item) == 0 {
		// An earlier attempt of this call may have deleted it.
		if _, found, err := s.current(ctx, id, nil); err != nil {
			return err
		} else if !found {
			return nil
		}
	}
	return idem.ErrFenced
}

// Get implements idem.Store: one strongly consistent GetItem (plus one
// BatchGetItem for a chunked response). A final record whose response
// cannot be read is returned without it, found, beside the error: one
// matching idem.ErrNotKept when the response is no longer held whole, as
// Claim returns it, so a caller can judge it by its record (kit's
// reconciled-records store tells chunks still replicating from chunks
// lost by the record's completion time); the chunk read's own error (an
// outage, a corruption) otherwise, so that a caller needing the record
// alone (the Guard's read back of a completion whose every answer was
// lost: its owner and state) has it.
func (s *Store) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	if !keyspace.IsCaller(id) {
		return idem.Record{}, false, nil
	}
	st, ok, err := s.current(ctx, id, nil)
	if err != nil || !ok || st.rec.Expired(now) {
		return idem.Record{}, false, err
	}
	rec, err := s.withResponse(ctx, st)
	if err != nil {
		rec = st.rec
		rec.Response = nil
		return rec, true, err
	}
	return rec, true, nil
}

// refusedOnlySend reports whether err is the engine's refusal of a
// completion's write as a request (a ValidationException: business writes
// naming one item twice, an item it cannot take; a ResourceNotFoundException),
// met by the call's only send: nothing was applied, so the chunk items
// written for its response are referenced by nothing and are deleted, as a
// cancelled transaction's are (RED_TEAM 566). After an SDK retry an
// earlier send may have applied the completion, so they stay.
func refusedOnlySend(err error, sent *sendCount) bool {
	var ae interface{ ErrorCode() string }
	if sent.retried() || !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ValidationException", "ResourceNotFoundException":
		return true
	}
	return false
}

func isUnsupported(err error) bool {
	var ae interface{ ErrorCode() string }
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "UnknownOperationException", "UnknownOperation", "NotImplemented", "NotYetImplemented":
		return true
	}
	return false
}
