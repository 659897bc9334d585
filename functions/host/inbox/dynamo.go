package inbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/internal/storeconfig"
)

// DynamoAPI is the part of the DynamoDB client Dynamo uses.
type DynamoAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// DynamoConfig configures a Dynamo.
type DynamoConfig struct {
	// Client is the DynamoDB client. Required.
	Client DynamoAPI
	// Table is the RunsTable name (the inbox shares the runs' table).
	// Required.
	Table string
	// Config holds what both stores share (Retention).
	Config
}

// ErrConfig matches the error NewDynamo returns for an invalid DynamoConfig.
var ErrConfig = errors.New("inbox: invalid config")

// Dynamo is the RunsTable Store: one item per tenant, pk
// "#inbox/<tenant>" (a pk starting with "#" is never a runId, and the run
// store's readers skip such items), with per entry "e_<id>" (the entry as
// JSON text) and, once decided, "s_<id>" (its State; absent: waiting),
// "b_<id>" (the decision's by) and "t_<id>" (DecidedAt, Unix ms). Keep and
// a winning Decide are one conditional UpdateItem (a Decide that forgets
// old final entries one more); List and Get a strongly consistent GetItem;
// a Decide or Keep whose condition failed says what happened from the item
// the failed write returned, reading it once only where the engine returns
// none (refusedItem). An item holds up to 400 KB, about a thousand waiting or
// recently decided writes; a Keep beyond that writes nothing and is
// ErrFull. A waiting entry also holds "r_<id>", room reserved for its
// decision: a final Decide replaces it with s_, b_ and t_, so it never
// grows the item, and an inbox that no longer takes a new entry still
// decides (discards, resubmits) every entry it holds. A resubmission
// holds an entry in "h_<id>", which replaces r_<id> and is as long, name
// and value (heldRoom: the holder and the time, the room's text after
// them), so that handing the entry back (r_<id> again) takes exactly the
// bytes the hold took, whatever other entries took meanwhile of the item. "n_<caller>" counts a caller's new
// entries against Config.MaxPerCaller (Keep), and "g_<caller>" counts the
// times that count was set back to the caller's entries; both go when the
// caller's last entry is forgotten.
type Dynamo struct {
	cfg DynamoConfig
}

// NewDynamo returns a Dynamo; every problem of cfg is reported at once, in
// one error matching ErrConfig.
func NewDynamo(cfg DynamoConfig) (*Dynamo, error) {
	if err := storeconfig.Check("inbox", ErrConfig, cfg.Client, cfg.Table); err != nil {
		return nil, err
	}
	return &Dynamo{cfg: cfg}, nil
}

const (
	attrPK      = "pk"
	entryPrefix = "e_"
	statePrefix = "s_"
	byPrefix    = "b_"
	atPrefix    = "t_"
	roomPrefix  = "r_"
	countPrefix = "n_"
	resetPrefix = "g_"
	heldPrefix  = "h_"
)

// room is what r_<id> holds: more than the bytes a decision's s_, b_ and
// t_ take (three 24-byte names, "resubmitting", a 22-character by and a
// millisecond time, at most about 130 bytes on every engine's count), with
// a margin of some 90 bytes for an entry handed back updated (a cancel's
// entry grows by a few digits of version and time and one status name at
// most).
var room = strings.Repeat(".", 200)

// heldBy is how h_<id> begins while the resubmission by holds the entry:
// by's length first, so that no by's text begins another's.
func heldBy(by string) string { return strconv.Itoa(len(by)) + "|" + by + "|" }

// heldRoom is h_<id> while the resubmission by holds the entry since at:
// heldBy, the time in Unix ms and the rest of the room, as long as the
// room; false when by is too long for it (the hold is then kept in s_, b_
// and t_, as a final decision).
func heldRoom(by string, at time.Time) (string, bool) {
	h := heldBy(by) + strconv.FormatInt(at.UnixMilli(), 10) + "|"
	if len(h) > len(room) {
		return "", false
	}
	return h + room[len(h):], true
}

// notHeld is the condition that no resubmission holds entry id in h_<id>.
func notHeld(id string) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(heldPrefix + id))
}

// heldByCond is the condition that the resubmission by holds entry id (in
// its room, or in s_ and b_).
func heldByCond(id, by string) expression.ConditionBuilder {
	return expression.Name(heldPrefix + id).BeginsWith(heldBy(by)).
		Or(expression.Name(statePrefix + id).Equal(expression.Value(string(Resubmitting))).
			And(expression.Name(byPrefix + id).Equal(expression.Value(by))))
}

func key(tenant string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: "#inbox/" + tenant}}
}

// Keep implements Store (SET e_<id> and its reserved room r_<id>, REMOVE
// its decision; conditional on the entry waiting or held by by). A new
// entry of a caller (by "" and Caller set) is counted in that caller's
// "n_<caller>" in the same write, conditional on the entry being new and
// the count below MaxPerCaller. The count only grows (a decision does not
// touch it) and never falls below the caller's listed entries; a Keep
// that finds it at the share takes the item from its refused write (as any
// refused condition: refusedItem) and, when the caller's listed entries
// leave room, writes the
// entry with the count set to them, conditional on the count and its
// resets ("g_<caller>", one more with each such write) as read: the count
// alone may read the same again after another Keep set it back (to the
// same number, or lower and counted up again), and two Keeps would both
// take the last place. So
// a Keep under the share is one write, as before; one at the count's limit
// a write more; the same entry kept again (its refusal re-executed) a
// write more; each with one read more where the engine returns no item
// from a refused write.
func (d *Dynamo) Keep(ctx context.Context, e Entry, by string) error {
	e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if by != "" || e.Caller == "" {
		return d.keep(ctx, e, b, by)
	}
	share := d.cfg.maxPerCaller()
	n := expression.Name(countPrefix + e.Caller)
	cond := expression.AttributeNotExists(expression.Name(entryPrefix + e.ID)).
		And(expression.AttributeNotExists(n).Or(n.LessThan(expression.Value(share))))
	err = d.write(ctx, e, b, cond, expression.Add(n, expression.Value(1)))
	for range 3 {
		if !failedCondition(err) {
			return err
		}
		it, gerr := d.refusedItem(ctx, err, e.Tenant)
		if gerr != nil {
			return gerr
		}
		if cur, ok := decode(it, e.Tenant, e.ID); ok {
			if !keepable(cur, "") {
				return &DecidedError{Entry: cur}
			}
			// The same refused write refused again: replaced, not counted.
			return d.keep(ctx, e, b, "")
		}
		held := listedOf(entries(it, e.Tenant), e.Caller, e.ID)
		if held >= share {
			return fmt.Errorf("%w: the caller holds %d waiting writes, its share", ErrFull, held)
		}
		// The count ran ahead of the entries (some were decided): set it
		// to them, if no other Keep of the caller counted (n) or set it
		// back (g) meanwhile.
		cond := expression.AttributeNotExists(expression.Name(entryPrefix+e.ID)).
			And(asRead(it, countPrefix+e.Caller), asRead(it, resetPrefix+e.Caller))
		upd := expression.Set(n, expression.Value(held+1)).Add(expression.Name(resetPrefix+e.Caller), expression.Value(1))
		err = d.write(ctx, e, b, cond, upd)
	}
	if failedCondition(err) {
		return fmt.Errorf("inbox: keep entry: the caller's count kept changing under it")
	}
	return err
}

// asRead is the condition that the number attribute attr holds what item
// it held when read (or is still absent).
func asRead(it map[string]types.AttributeValue, attr string) expression.ConditionBuilder {
	name := expression.Name(attr)
	if v, ok := it[attr].(*types.AttributeValueMemberN); ok {
		return name.Equal(expression.Value(&types.AttributeValueMemberN{Value: v.Value}))
	}
	return expression.AttributeNotExists(name)
}

// keep is Keep's write of an entry that may exist: conditional on it
// waiting or held by by; a refused condition reads the entry once and is
// a *DecidedError.
func (d *Dynamo) keep(ctx context.Context, e Entry, b []byte, by string) error {
	cond := expression.AttributeNotExists(expression.Name(statePrefix + e.ID)).And(notHeld(e.ID))
	if by != "" {
		cond = cond.Or(heldByCond(e.ID, by))
	}
	err := d.write(ctx, e, b, cond, expression.UpdateBuilder{})
	if failedCondition(err) {
		cur, gerr := d.refusedEntry(ctx, err, e.Tenant, e.ID)
		if gerr != nil {
			return gerr
		}
		return &DecidedError{Entry: cur}
	}
	return err
}

// write is one conditional UpdateItem of entry e (its JSON b): SET e_<id>
// and r_<id>, REMOVE its decision, and upd's actions besides. A refused
// condition is returned as DynamoDB's error (failedCondition), a write past
// the item limit as ErrFull.
func (d *Dynamo) write(ctx context.Context, e Entry, b []byte, cond expression.ConditionBuilder, upd expression.UpdateBuilder) error {
	upd = upd.Set(expression.Name(entryPrefix+e.ID), expression.Value(string(b))).
		Set(expression.Name(roomPrefix+e.ID), expression.Value(room)).
		Remove(expression.Name(statePrefix + e.ID)).Remove(expression.Name(byPrefix + e.ID)).Remove(expression.Name(atPrefix + e.ID)).
		Remove(expression.Name(heldPrefix + e.ID))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	_, err = d.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.cfg.Table), Key: key(e.Tenant), UpdateExpression: expr.Update(),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	switch {
	case err == nil, failedCondition(err):
		return err
	case tooLarge(err):
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	return fmt.Errorf("inbox: keep entry: %w", err)
}

// tooLarge reports whether err is DynamoDB's refusal of a write whose item
// would pass its 400 KB limit: a ValidationException naming the item size
// ("Item size has exceeded the maximum allowed size", "Item size to update
// has exceeded ...", as DynamoDB, DynamoDB Local, moto and dynalite word it).
func tooLarge(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" && strings.Contains(ae.ErrorMessage(), "Item size")
}

// refusedItem is the tenant's inbox item as the refused write err found
// it: the item the write returned (ReturnValuesOnConditionCheckFailure
// ALL_OLD, as DynamoDB returns it), else, where the engine returns none or
// there is no item, one consistent read (RED_TEAM 492: the read was made
// on every refusal, up to 100 read units for a full inbox).
func (d *Dynamo) refusedItem(ctx context.Context, err error, tenant string) (map[string]types.AttributeValue, error) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) > 0 {
		return ccf.Item, nil
	}
	return d.item(ctx, tenant)
}

// refusedEntry is Get of the entry id after the refused write err
// (refusedItem).
func (d *Dynamo) refusedEntry(ctx context.Context, err error, tenant, id string) (Entry, error) {
	it, err := d.refusedItem(ctx, err, tenant)
	if err != nil {
		return Entry{}, err
	}
	e, ok := decode(it, tenant, id)
	if !ok {
		return Entry{}, ErrNotFound
	}
	return e, nil
}

func (d *Dynamo) item(ctx context.Context, tenant string) (map[string]types.AttributeValue, error) {
	out, err := d.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.cfg.Table), Key: key(tenant), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("inbox: read inbox: %w", err)
	}
	return out.Item, nil
}

// decode returns the entry id of item it, with its decision; false when it
// holds none of tenant's.
func decode(it map[string]types.AttributeValue, tenant, id string) (Entry, bool) {
	s, ok := it[entryPrefix+id].(*types.AttributeValueMemberS)
	if !ok {
		return Entry{}, false
	}
	var e Entry
	if json.Unmarshal([]byte(s.Value), &e) != nil || e.Tenant != tenant || e.ID != id {
		return Entry{}, false
	}
	e.State = Waiting
	if v, ok := it[statePrefix+id].(*types.AttributeValueMemberS); ok {
		e.State = State(v.Value)
	}
	if v, ok := it[byPrefix+id].(*types.AttributeValueMemberS); ok {
		e.By = v.Value
	}
	if v, ok := it[atPrefix+id].(*types.AttributeValueMemberN); ok {
		if ms, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
			e.DecidedAt = time.UnixMilli(ms).UTC()
		}
	}
	if v, ok := it[heldPrefix+id].(*types.AttributeValueMemberS); ok && e.State == Waiting {
		// heldRoom: <len(by)>|<by>|<ms>|<the room's rest>
		e.State = Resubmitting
		n, rest, _ := strings.Cut(v.Value, "|")
		if l, err := strconv.Atoi(n); err == nil && l >= 0 && l < len(rest) && rest[l] == '|' {
			e.By = rest[:l]
			ms, _, _ := strings.Cut(rest[l+1:], "|")
			if t, err := strconv.ParseInt(ms, 10, 64); err == nil {
				e.DecidedAt = time.UnixMilli(t).UTC()
			}
		}
	}
	return e, true
}

// entries returns every entry of item it that is tenant's.
func entries(it map[string]types.AttributeValue, tenant string) []Entry {
	out := []Entry{}
	for k := range it {
		if id, ok := strings.CutPrefix(k, entryPrefix); ok {
			if e, ok := decode(it, tenant, id); ok {
				out = append(out, e)
			}
		}
	}
	return out
}

// List implements Store.
func (d *Dynamo) List(ctx context.Context, tenant string) ([]Entry, error) {
	it, err := d.item(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	for _, e := range entries(it, tenant) {
		if e.State.Listed() {
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out, nil
}

// Get implements Store.
func (d *Dynamo) Get(ctx context.Context, tenant, id string) (Entry, error) {
	it, err := d.item(ctx, tenant)
	if err != nil {
		return Entry{}, err
	}
	e, ok := decode(it, tenant, id)
	if !ok {
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// Decide implements Store: one UpdateItem whose condition is the
// compare-and-set (allowed), replacing the entry's reserved room with the
// decision (to Resubmitting: with the hold h_<id>, as long; to Waiting:
// the hold, or the decision, with the room), returning the item; then, when it holds final
// entries older than the retention, one UpdateItem forgetting them.
func (d *Dynamo) Decide(ctx context.Context, tenant, id string, to State, by string, now time.Time) (Entry, error) {
	if err := checkDecision(to, by); err != nil {
		return Entry{}, err
	}
	s, b := expression.Name(statePrefix+id), expression.Name(byPrefix+id)
	var cond expression.ConditionBuilder
	if to == Resubmitted || to == Waiting {
		cond = heldByCond(id, by)
	} else {
		cond = expression.AttributeExists(expression.Name(entryPrefix+id)).And(expression.AttributeNotExists(s), notHeld(id))
	}
	at := now.UTC().Truncate(time.Millisecond)
	upd := expression.Set(s, expression.Value(string(to))).Set(b, expression.Value(by)).
		Set(expression.Name(atPrefix+id), expression.Value(at.UnixMilli())).
		Remove(expression.Name(roomPrefix + id)).Remove(expression.Name(heldPrefix + id))
	if h, ok := heldRoom(by, at); ok && to == Resubmitting {
		// Held in h_<id> in place of the room, as long: the item keeps
		// its size.
		upd = expression.Remove(expression.Name(roomPrefix+id)).Set(expression.Name(heldPrefix+id), expression.Value(h))
	}
	if to == Waiting {
		// Handed back as it was: the decision's room again in place of
		// the hold (e_<id> untouched).
		upd = expression.Remove(s).Remove(b).Remove(expression.Name(atPrefix+id)).Remove(expression.Name(heldPrefix+id)).
			Set(expression.Name(roomPrefix+id), expression.Value(room))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return Entry{}, err
	}
	out, err := d.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.cfg.Table), Key: key(tenant), UpdateExpression: expr.Update(),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if failedCondition(err) {
		cur, gerr := d.refusedEntry(ctx, err, tenant, id)
		switch {
		case gerr != nil:
			return Entry{}, gerr
		case again(cur, to, by):
			return cur, nil
		}
		return Entry{}, &DecidedError{Entry: cur}
	}
	if err != nil {
		return Entry{}, fmt.Errorf("inbox: decide entry: %w", err)
	}
	e, ok := decode(out.Attributes, tenant, id)
	if !ok {
		return Entry{}, fmt.Errorf("inbox: decide entry: the item holds no entry %s after the write", id)
	}
	d.forget(ctx, tenant, out.Attributes, now)
	return e, nil
}

// maxForget bounds how many entries and caller counts one forget write
// removes: DynamoDB refuses an expression over 4 KB, and each costs about
// 70 bytes of it (six names removed, two or four compared). The oldest
// decisions go first; the rest wait for the next decision.
const maxForget = 25

// forget removes the final entries of item it decided Retention before
// now, the oldest maxForget of them, and the count (n_, g_) of every
// caller that then holds no entry, within the same bound: a caller's
// count is needed only while it holds one (it never falls below its
// listed entries), and callers that come and go would otherwise fill the
// item with counts. A count is removed only as read (a Keep of its
// caller meanwhile refuses the write). Best effort: a failure leaves them
// for the next decision. The conditions are one flat conjunction, not a
// nested one (an engine's parser may take time exponential in nesting).
func (d *Dynamo) forget(ctx context.Context, tenant string, it map[string]types.AttributeValue, now time.Time) {
	cutoff := now.Add(-d.cfg.retention())
	var upd expression.UpdateBuilder
	var conds []expression.ConditionBuilder
	holding := map[string]bool{}
	var old []Entry
	for _, e := range entries(it, tenant) {
		if !e.State.Final() || !e.DecidedAt.Before(cutoff) {
			holding[e.Caller] = true
			continue
		}
		old = append(old, e)
	}
	slices.SortFunc(old, func(a, b Entry) int { return cmp.Or(a.DecidedAt.Compare(b.DecidedAt), strings.Compare(a.ID, b.ID)) })
	for i, e := range old {
		if i >= maxForget {
			holding[e.Caller] = true // kept for the next decision
			continue
		}
		for _, p := range []string{entryPrefix, statePrefix, byPrefix, atPrefix, roomPrefix, heldPrefix} {
			upd = upd.Remove(expression.Name(p + e.ID))
		}
		// Only the decision seen: nothing else removed.
		conds = append(conds, expression.Name(statePrefix+e.ID).Equal(expression.Value(string(e.State))),
			expression.Name(atPrefix+e.ID).Equal(expression.Value(e.DecidedAt.UnixMilli())))
	}
	removed := min(len(old), maxForget)
	for k := range it {
		caller, ok := strings.CutPrefix(k, countPrefix)
		if !ok || holding[caller] || removed >= maxForget {
			continue
		}
		upd = upd.Remove(expression.Name(k)).Remove(expression.Name(resetPrefix + caller))
		conds = append(conds, asRead(it, k), asRead(it, resetPrefix+caller))
		removed++
	}
	if removed == 0 {
		return
	}
	cond := conds[0]
	if len(conds) > 1 {
		cond = expression.And(conds[0], conds[1], conds[2:]...)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return
	}
	_, _ = d.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.cfg.Table), Key: key(tenant), UpdateExpression: expr.Update(),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
}

// failedCondition reports whether err is a failed condition.
func failedCondition(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}
