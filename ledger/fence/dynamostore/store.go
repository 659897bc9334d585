// Package dynamostore is the DynamoDB fence.Store: the FenceTable of
// template.yaml (pk S), which must be linearizable: a table in ONE home
// region that every region's executors call, or an MRSC global table. It
// must never be an MREC global table (conditions there are checked against
// the local replica only).
//
// Item (pk "fence#<effectId>"): tok (N, newest token issued), passed (N,
// the token that passed the point of no return; absent if none),
// passedRegion (S), passedAt (N, Unix ms), expiresAtMs (N) and expiresAt (N,
// Unix seconds, the TTL attribute; on an MRSC table, which has no TTL, the
// Sweeper, functions/sweeper, deletes expired items).
//
// Round trips: Token is one conditional UpdateItem (a second one, extending
// the item's retention, when it is refused because a token passed); Pass is one conditional
// UpdateItem (plus a consistent GetItem only when the condition fails and
// the server did not return the old item). No transactions.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/storeconfig"
	"github.com/idemkit/idemkit/ledger/fence"
)

// API is the part of *dynamodb.Client the store uses.
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Store is a fence.Store on one DynamoDB table. Safe for concurrent use.
type Store struct {
	api   API
	table string
}

var _ fence.Store = (*Store)(nil)

// Config configures a Store. Validated by New.
type Config struct {
	// Client is the DynamoDB client (a *dynamodb.Client) for the fence
	// table's home region. Required.
	Client API
	// Table is the name of the table created from template.yaml's
	// FenceTable (pk S). Required.
	Table string
}

// ErrConfig is matched (errors.Is) by every error New returns for an
// invalid Config; the error lists every missing field.
var ErrConfig = errors.New("fence/dynamostore: invalid config")

// New returns a Store for cfg, or an error naming every missing field
// (matching ErrConfig).
func New(cfg Config) (*Store, error) {
	if err := storeconfig.Check("fence/dynamostore", ErrConfig, cfg.Client, cfg.Table); err != nil {
		return nil, err
	}
	return &Store{api: cfg.Client, table: cfg.Table}, nil
}

// item is the DynamoDB shape of a fence.Item.
type item struct {
	PK           string  `dynamodbav:"pk"`
	Tok          uint64  `dynamodbav:"tok"`
	Passed       *uint64 `dynamodbav:"passed,omitempty"`
	PassedRegion string  `dynamodbav:"passedRegion,omitempty"`
	PassedAt     int64   `dynamodbav:"passedAt,omitempty"`
	ExpiresAtMs  int64   `dynamodbav:"expiresAtMs"`
	ExpiresAt    int64   `dynamodbav:"expiresAt"`
}

const prefix = "fence#"

func (s *Store) key(effectID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: prefix + effectID}}
}

func decode(av map[string]types.AttributeValue) (*fence.Item, error) {
	if len(av) == 0 {
		return nil, nil
	}
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, fmt.Errorf("fence/dynamostore: decode: %w", err)
	}
	out := &fence.Item{EffectID: it.PK[len(prefix):], Token: it.Tok, ExpiresAt: time.UnixMilli(it.ExpiresAtMs).UTC()}
	if it.Passed != nil {
		out.Passed = &fence.Passed{Token: *it.Passed, Region: it.PassedRegion, At: time.UnixMilli(it.PassedAt).UTC()}
	}
	return out, nil
}

// Acquire implements fence.Store with one UpdateItem (two when a token has
// passed: the second extends the item's retention, see keep):
//
//	SET tok = if_not_exists(tok, :seed) + 1, expiresAtMs = :e, expiresAt = :es
//	REMOVE passed, passedRegion, passedAt
//	IF attribute_not_exists(passed) OR expiresAtMs <= :now
//
// returning the new token (UPDATED_NEW), or the passed token from the old
// item on a failed condition.
func (s *Store) Acquire(ctx context.Context, effectID string, seed uint64, now, expires time.Time) (uint64, *fence.Passed, error) {
	upd := expression.Set(expression.Name("tok"),
		expression.Plus(expression.IfNotExists(expression.Name("tok"), expression.Value(seed)), expression.Value(1))).
		Set(expression.Name("expiresAtMs"), expression.Value(expires.UnixMilli())).
		Set(expression.Name("expiresAt"), expression.Value((expires.UnixMilli()+999)/1000)).
		Remove(expression.Name("passed")).
		Remove(expression.Name("passedRegion")).
		Remove(expression.Name("passedAt"))
	cond := expression.AttributeNotExists(expression.Name("passed")).
		Or(expression.Name("expiresAtMs").LessThanEqual(expression.Value(now.UnixMilli())))
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return 0, nil, fmt.Errorf("fence/dynamostore: expression: %w", err)
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.key(effectID),
		UpdateExpression:                    ex.Update(),
		ConditionExpression:                 ex.Condition(),
		ExpressionAttributeNames:            ex.Names(),
		ExpressionAttributeValues:           ex.Values(),
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		n, ok := out.Attributes["tok"].(*types.AttributeValueMemberN)
		if !ok {
			return 0, nil, errors.New("fence/dynamostore: UpdateItem returned no token")
		}
		tok, err := strconv.ParseUint(n.Value, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("fence/dynamostore: token %q: %w", n.Value, err)
		}
		return tok, nil, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return 0, nil, fmt.Errorf("fence/dynamostore: UpdateItem: %w", err)
	}
	cur, err := decode(ccf.Item)
	if err != nil {
		return 0, nil, err
	}
	if cur == nil {
		if cur, err = s.Get(ctx, effectID); err != nil {
			return 0, nil, err
		}
	}
	if cur == nil || cur.Passed == nil {
		// The condition failed, so a token had passed; it can only have
		// vanished since by deletion after retention. Report it as issued
		// without details rather than guess.
		return 0, &fence.Passed{}, nil
	}
	if err := s.keep(ctx, effectID, cur.Passed.Token, expires); err != nil {
		return 0, nil, err
	}
	return 0, cur.Passed, nil
}

// keep extends the retention of effectID's item, whose token passed, to
// expires (a refused Acquire), with one UpdateItem:
//
//	SET expiresAtMs = :e, expiresAt = :es
//	IF passed = :p AND expiresAtMs < :e
//
// A failed condition means the retention is already as long (or the pass
// is gone, which only retention ends): nothing to do.
func (s *Store) keep(ctx context.Context, effectID string, passed uint64, expires time.Time) error {
	upd := expression.Set(expression.Name("expiresAtMs"), expression.Value(expires.UnixMilli())).
		Set(expression.Name("expiresAt"), expression.Value((expires.UnixMilli()+999)/1000))
	cond := expression.Name("passed").Equal(expression.Value(passed)).
		And(expression.Name("expiresAtMs").LessThan(expression.Value(expires.UnixMilli())))
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("fence/dynamostore: expression: %w", err)
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.key(effectID),
		UpdateExpression:          ex.Update(),
		ConditionExpression:       ex.Condition(),
		ExpressionAttributeNames:  ex.Names(),
		ExpressionAttributeValues: ex.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("fence/dynamostore: UpdateItem (retention of a pass): %w", err)
	}
	return nil
}

// Keep implements fence.Store with one UpdateItem:
//
//	SET expiresAtMs = :e, expiresAt = :es
//	IF tok = :t AND expiresAtMs > :now AND expiresAtMs < :e
//
// A failed condition is ok when the old item (ALL_OLD) is this token's,
// within its retention at now, and already kept until :e or later.
func (s *Store) Keep(ctx context.Context, effectID string, token uint64, now, expires time.Time) (bool, error) {
	upd := expression.Set(expression.Name("expiresAtMs"), expression.Value(expires.UnixMilli())).
		Set(expression.Name("expiresAt"), expression.Value((expires.UnixMilli()+999)/1000))
	cond := expression.Name("tok").Equal(expression.Value(token)).
		And(expression.Name("expiresAtMs").GreaterThan(expression.Value(now.UnixMilli()))).
		And(expression.Name("expiresAtMs").LessThan(expression.Value(expires.UnixMilli())))
	applied, cur, err := s.update(ctx, effectID, upd, cond, "retention of a token")
	if err != nil || applied {
		return applied, err
	}
	return cur != nil && cur.Token == token && cur.ExpiresAt.After(now) && !cur.ExpiresAt.Before(expires.Truncate(time.Millisecond)), nil
}

// Pass implements fence.Store with one UpdateItem:
//
//	SET passed = :t, passedRegion = :r, passedAt = :now
//	IF tok = :t AND attribute_not_exists(passed)
//
// A failed condition against an item whose passed token is :t is this
// call's own earlier write (an SDK retry after a lost response): ok.
func (s *Store) Pass(ctx context.Context, effectID string, token uint64, region string, now time.Time) (bool, *fence.Item, error) {
	upd := expression.Set(expression.Name("passed"), expression.Value(token)).
		Set(expression.Name("passedAt"), expression.Value(now.UnixMilli()))
	if region != "" {
		upd = upd.Set(expression.Name("passedRegion"), expression.Value(region))
	}
	cond := expression.Name("tok").Equal(expression.Value(token)).
		And(expression.AttributeNotExists(expression.Name("passed")))
	applied, cur, err := s.update(ctx, effectID, upd, cond, "")
	if err != nil || applied {
		return applied, nil, err
	}
	if cur != nil && cur.Passed != nil && cur.Passed.Token == token {
		return true, nil, nil
	}
	return false, cur, nil
}

// Reopen implements fence.Store with one UpdateItem:
//
//	SET tok = tok + 1 REMOVE passed, passedRegion, passedAt
//	IF passed = :t OR (tok = :t AND attribute_not_exists(passed))
//
// Raising tok retires the reopened token: a late Pass of it (the retry of
// a pass whose answer was lost, or the pass of an attempt that stalled
// before it) is refused, never left for a retried Reopen to erase unseen.
// A failed condition against an item with no passed token (or no item)
// is ok: nothing to forget, and the token is not the newest (retired
// already). Otherwise another token passed.
func (s *Store) Reopen(ctx context.Context, effectID string, token uint64) (bool, *fence.Item, error) {
	upd := expression.Set(expression.Name("tok"), expression.Plus(expression.Name("tok"), expression.Value(1))).
		Remove(expression.Name("passed")).
		Remove(expression.Name("passedRegion")).
		Remove(expression.Name("passedAt"))
	cond := expression.Name("passed").Equal(expression.Value(token)).
		Or(expression.Name("tok").Equal(expression.Value(token)).And(expression.AttributeNotExists(expression.Name("passed"))))
	applied, cur, err := s.update(ctx, effectID, upd, cond, "")
	if err != nil || applied {
		return applied, nil, err
	}
	if cur == nil || cur.Passed == nil {
		return true, nil, nil
	}
	return false, cur, nil
}

// update sends one conditional UpdateItem of effectID's item. applied
// reports that the condition held. When it failed, cur is the item as it
// was (the failed write's ALL_OLD, or a strongly consistent read on an
// endpoint that returns none; nil when there is no item). what names the
// write in an error, "" for none.
func (s *Store) update(ctx context.Context, effectID string, upd expression.UpdateBuilder, cond expression.ConditionBuilder, what string) (applied bool, cur *fence.Item, err error) {
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return false, nil, fmt.Errorf("fence/dynamostore: expression: %w", err)
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.key(effectID),
		UpdateExpression:                    ex.Update(),
		ConditionExpression:                 ex.Condition(),
		ExpressionAttributeNames:            ex.Names(),
		ExpressionAttributeValues:           ex.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, nil, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		if what != "" {
			return false, nil, fmt.Errorf("fence/dynamostore: UpdateItem (%s): %w", what, err)
		}
		return false, nil, fmt.Errorf("fence/dynamostore: UpdateItem: %w", err)
	}
	if cur, err = decode(ccf.Item); err != nil || cur != nil {
		return false, cur, err
	}
	cur, err = s.Get(ctx, effectID)
	return false, cur, err
}

// Get implements fence.Store with a strongly consistent GetItem.
func (s *Store) Get(ctx context.Context, effectID string) (*fence.Item, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(effectID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("fence/dynamostore: GetItem: %w", err)
	}
	return decode(out.Item)
}
