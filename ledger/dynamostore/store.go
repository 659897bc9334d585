// Package dynamostore is the DynamoDB ledger.Store: the effects table of
// template.yaml (EffectsTable: pk S + sk S, GSI byRun(runKey, sk) keys only, TTL
// expiresAt, NEW_AND_OLD_IMAGES stream, a global table).
//
// Key design: ONE item per effect (pk "effect#<effectId>", sk "record") or
// host slot (pk "host#<hash>", sk "record"), holding the record's state,
// owner token, lease, fence, outcome and every attempt. Witness rows are
// derived from the attempts list, and the item carries runKey (the run that
// created it) for the byRun index, so every ledger write is a single
// conditional PutItem on one item: no transactions (MRSC global tables do not
// support them), and each write's stream image is the whole record.
//
// Item layout (packed.go): top level only the keys, runKey, the TTL
// attribute and the attributes the write conditions test (owner, attempt,
// state, expiresAtMs, leaseUntil, fence); every other field, the attempts
// and the outcome are one binary attribute "d" in a compact packed
// encoding. Read them with DecodeRecord, never by attribute name. Records
// written in the previous layout (one attribute per field) are still read,
// and the next write to one stores the compact layout.
//
// Item weight: a record item stays within one write unit (1 KB). A
// success's recorded value that would take it past that is kept in an item
// of its own beside the record (beside.go), written before the record write
// that references it and read with one consistent GetItem when the record is
// returned; so a duplicate's failed claim is billed one write unit whatever
// the value's size (under either reading of AWS's rule: the existing item's
// size, or the larger of the existing and the new item), plus the value's
// read. A record with many attempt rows can still outgrow 1 KB.
//
// Round trips: a claim is one PutItem (attribute_not_exists or past
// retention) with ReturnValuesOnConditionCheckFailure=ALL_OLD, so a duplicate
// costs one round trip (two where the server does not return the old item:
// then a consistent GetItem follows); a first effect costs two (claim,
// written in state firing, and outcome) without a ledger Fencer and three
// with one (claim, fire mark, outcome). The record's state is a plain
// attribute and Fired/FiredAt are in the packed attribute, so a claim
// written firing needs no layout of its own. Every condition includes
// expiresAtMs > now, because
// TTL deletion is lazy. Reads (Get) are strongly consistent; ListByRun finds
// a run's records in the GSI (eventually consistent membership) and reads
// each one consistently.
//
// Run references (AddRunRef): a run that takes part in an effect another run
// created gets a small item of its own under the effect's partition, sk
// "run#<runId>", runKey <runId>, TTL expiresAt: one unconditional PutItem,
// never a write to the record. ListByRun resolves each reference with a
// consistent GetItem of the record.
//
// A write the SDK retried after its response was lost is recognised: if the
// conditional check fails against exactly the item this call wrote (which
// carries the executor's unique owner token), the write is reported as
// successful.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/storeconfig"
	"github.com/idemkit/idemkit/ledger"
)

// IndexByRun is the GSI serving ListByRun.
const IndexByRun = "byRun"

// API is the part of *dynamodb.Client the store uses.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Store is a ledger.Store on one DynamoDB table. Safe for concurrent use.
type Store struct {
	api   API
	table string
}

var _ ledger.Store = (*Store)(nil)

// Config configures a Store. Validated by New.
type Config struct {
	// Client is the DynamoDB client (a *dynamodb.Client). Required. Its
	// retry policy is used as is: a write the SDK retried after its
	// response was lost is recognised (see the package doc).
	Client API
	// Table is the name of the table created from template.yaml's
	// EffectsTable (pk S + sk S, GSI byRun). Required.
	Table string
}

// ErrConfig is matched (errors.Is) by every error New returns for an
// invalid Config; the error lists every missing field.
var ErrConfig = errors.New("dynamostore: invalid config")

// New returns a Store for cfg, or an error naming every missing field
// (matching ErrConfig).
func New(cfg Config) (*Store, error) {
	if err := storeconfig.Check("dynamostore", ErrConfig, cfg.Client, cfg.Table); err != nil {
		return nil, err
	}
	return &Store{api: cfg.Client, table: cfg.Table}, nil
}

func (s *Store) key(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: k},
		"sk": &types.AttributeValueMemberS{Value: sortKey},
	}
}

func (s *Store) put(ctx context.Context, r *ledger.Record, cond *string, names map[string]string, values map[string]types.AttributeValue) (bool, *ledger.Record, error) {
	av, value := encodeWrite(r)
	if value != nil {
		if err := s.putValue(ctx, value); err != nil {
			return false, nil, err
		}
	}
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression:                 cond,
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, nil, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return false, nil, s.classify("PutItem", err)
	}
	item := ccf.Item
	if len(item) == 0 {
		if item, err = s.getItem(ctx, r.Key); err != nil {
			return false, nil, err
		}
	}
	var cur *ledger.Record
	if len(item) > 0 {
		if cur, err = decode(item); err != nil {
			return false, nil, err
		}
	}
	// Our own write, applied by an attempt whose response was lost: the
	// stored item is exactly the one this call sent (it carries this
	// executor's unique owner token, so another owner's record — every
	// duplicate — is told apart without decoding what was sent).
	if cur != nil && cur.Owner == r.Owner && valueRefOf(item) == valueRefOf(av) {
		if sent, err := decode(av); err == nil && reflect.DeepEqual(sent, cur) {
			return true, nil, nil
		}
	}
	if err := s.fill(ctx, cur, item); err != nil {
		return false, nil, err
	}
	return false, cur, nil
}

// Conditions, written once and flat: the expression builder's output
// (every operand parenthesised, nested ANDs) is what the emulators spent
// most of a ledger write parsing (docs/performance-history.md). The name maps are
// shared and only read.
var (
	condCreate  = aws.String("attribute_not_exists(#k) OR #e <= :n")
	namesCreate = map[string]string{"#k": "pk", "#e": "expiresAtMs"}

	// The owner, attempt and state of the expected record, live. An absent
	// item fails "#o = :o", so no attribute_exists is needed.
	condReplace = [4]*string{
		aws.String("#o = :o AND #a = :a AND #s = :s AND #e > :n"),
		aws.String("#o = :o AND #a = :a AND #s = :s AND #e > :n AND #l <= :n"),
		// "NOT #f > :f": fence absent (a comparison with an absent
		// attribute is false) or <= the new token.
		aws.String("#o = :o AND #a = :a AND #s = :s AND #e > :n AND NOT #f > :f"),
		aws.String("#o = :o AND #a = :a AND #s = :s AND #e > :n AND #l <= :n AND NOT #f > :f"),
	}
	namesReplace = [4]map[string]string{
		{"#o": "owner", "#a": "attempt", "#s": "state", "#e": "expiresAtMs"},
		{"#o": "owner", "#a": "attempt", "#s": "state", "#e": "expiresAtMs", "#l": "leaseUntil"},
		{"#o": "owner", "#a": "attempt", "#s": "state", "#e": "expiresAtMs", "#f": "fence"},
		{"#o": "owner", "#a": "attempt", "#s": "state", "#e": "expiresAtMs", "#l": "leaseUntil", "#f": "fence"},
	}
)

func avN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// Create implements ledger.Store: a conditional PutItem,
// attribute_not_exists(pk) OR expiresAtMs <= now.
func (s *Store) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	return s.put(ctx, rec, condCreate, namesCreate, map[string]types.AttributeValue{":n": avN(ms(now))})
}

// Replace implements ledger.Store: a conditional PutItem on owner, attempt,
// state, expiresAtMs > now, and optionally leaseUntil <= now and the fence.
func (s *Store) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	v := map[string]types.AttributeValue{
		":o": &types.AttributeValueMemberS{Value: want.Owner},
		":a": avN(int64(want.Attempt)),
		":s": &types.AttributeValueMemberS{Value: string(want.State)},
		":n": avN(ms(now)),
	}
	i := 0
	if want.LeaseExpired {
		i |= 1
	}
	if next.Fence > 0 {
		i |= 2
		v[":f"] = &types.AttributeValueMemberN{Value: strconv.FormatUint(next.Fence, 10)}
	}
	return s.put(ctx, next, condReplace[i], namesReplace[i], v)
}

// Get implements ledger.Store with a strongly consistent GetItem (and one
// more for a recorded value kept beside the record). A key no item can
// have (empty, or longer than DynamoDB's 2,048 bytes: an effect id typed
// by an operator) is absent, with no call; so is a record past its
// retention whose value item TTL has deleted first (see errValueLapsed;
// Scan and ListByRun leave it out too).
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if key == "" || len(key) > maxKeyBytes {
		// No item can have it: DynamoDB refuses such a key (a
		// ValidationException), where it is only absent.
		return nil, nil
	}
	item, err := s.getItem(ctx, key)
	if err != nil || len(item) == 0 {
		return nil, err
	}
	r, err := decode(item)
	if err != nil {
		return nil, err
	}
	if err := s.fill(ctx, r, item); errors.Is(err, errValueLapsed) {
		return nil, nil // past its retention: absent (see errValueLapsed)
	} else if err != nil {
		return nil, err
	}
	return r, nil
}

// maxKeyBytes is the longest partition key DynamoDB keeps.
const maxKeyBytes = 2048

// getItem reads the record item of key consistently (nil when absent).
func (s *Store) getItem(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, s.classify("GetItem", err)
	}
	return out.Item, nil
}

// AddRunRef implements ledger.Store: one unconditional PutItem of a
// run-reference item (idempotent).
func (s *Store) AddRunRef(ctx context.Context, key, runID string, expiresAt time.Time) error {
	av, err := attributevalue.MarshalMap(refItem{
		PK: key, SK: refPrefix + runID, RunKey: runID, Kind: kindRunRef,
		ExpiresAtMs: ms(expiresAt), ExpiresAt: (ms(expiresAt) + 999) / 1000,
	})
	if err != nil {
		return fmt.Errorf("dynamostore: encode: %w", err)
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return s.classify("PutItem run reference", err)
	}
	return nil
}

// ListByRun implements ledger.Store by querying the byRun GSI (eventually
// consistent membership), all pages. The index holds keys only (no write
// pays for a copy of the record in it), so each record found, created by the
// run or named by a run reference, is read with a consistent GetItem: one
// Query page plus one GetItem per effect. A record named by a reference
// that holds no attempt of the run (a suppressed duplicate's contact, under
// ledger.Config.WitnessDuplicates, or a later effect) costs one more
// GetItem, of the reference's expiry.
func (s *Store) ListByRun(ctx context.Context, runID string) ([]*ledger.Record, error) {
	if runID == "" {
		return nil, nil
	}
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(IndexByRun),
		KeyConditionExpression:    aws.String("#r = :r"),
		ExpressionAttributeNames:  map[string]string{"#r": "runKey"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberS{Value: runID}},
	})
	var created, refs []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.classify("Query "+IndexByRun, err)
		}
		for _, av := range page.Items {
			pk, ok := av["pk"].(*types.AttributeValueMemberS)
			if !ok {
				continue
			}
			if sk, ok := av["sk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, refPrefix) {
				refs = append(refs, pk.Value)
			} else {
				created = append(created, pk.Value)
			}
		}
	}
	var out []*ledger.Record
	seen := map[string]bool{}
	for i, key := range append(created, refs...) {
		if seen[key] {
			continue
		}
		seen[key] = true
		r, err := s.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		if i >= len(created) && r.RunID != runID && !attemptedBy(r, runID) {
			// Listed on the reference alone: only while the record is
			// the one it was written for, created before it expired.
			if ok, err := s.refVouches(ctx, key, runID, r); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// attemptedBy reports whether r holds an attempt of runID.
func attemptedBy(r *ledger.Record, runID string) bool {
	for _, a := range r.Attempts {
		if a.RunID == runID {
			return true
		}
	}
	return false
}

// refVouches reads runID's reference to the record under key (one
// consistent GetItem) and reports whether r was created before the
// reference expired: a record created after it is a later effect under
// the same identity (ledger.Store.ListByRun). A reference TTL deleted
// since the index was read vouches for nothing.
func (s *Store) refVouches(ctx context.Context, key, runID string, r *ledger.Record) (bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: key},
			"sk": &types.AttributeValueMemberS{Value: refPrefix + runID},
		},
		ProjectionExpression:     aws.String("#e"),
		ExpressionAttributeNames: map[string]string{"#e": "expiresAtMs"},
	})
	if err != nil {
		return false, s.classify("GetItem run reference", err)
	}
	n, ok := out.Item["expiresAtMs"].(*types.AttributeValueMemberN)
	if !ok {
		return false, nil
	}
	exp, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return false, fmt.Errorf("dynamostore: run reference expiresAtMs %q: %w", n.Value, err)
	}
	return r.CreatedAt.Before(fromMs(exp)), nil
}

// decode reads a record item in the compact layout or, failing that, in
// the previous one (one attribute per field, attempts a list of maps).
func decode(av map[string]types.AttributeValue) (*ledger.Record, error) {
	if r, ok, err := decodeItem(av); ok {
		return r, err
	}
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, fmt.Errorf("dynamostore: decode: %w", err)
	}
	return it.record(), nil
}

// ScanAPI is the Scan operation of *dynamodb.Client, used by Scan only.
type ScanAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// ErrNoScanAPI is returned by Scan when the store's API has no Scan.
var ErrNoScanAPI = errors.New("dynamostore: the client cannot Scan")

// Scan implements ledger.Scanner for operator tooling (`idemkit effects
// list` without a run): a paginated Scan of the whole table reading record
// items only (sk "record"; run references are skipped, and so is a record
// past its retention whose value item TTL deleted first, see
// errValueLapsed). It reads every item, so it costs the table's size in
// read capacity: never on a request path. The API given to New must also
// implement ScanAPI (a *dynamodb.Client does).
func (s *Store) Scan(ctx context.Context, fn func(*ledger.Record) bool) error {
	api, ok := s.api.(ScanAPI)
	if !ok {
		return ErrNoScanAPI
	}
	p := dynamodb.NewScanPaginator(api, &dynamodb.ScanInput{
		TableName: aws.String(s.table), FilterExpression: aws.String("sk = :record"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":record": &types.AttributeValueMemberS{Value: sortKey}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.classify("Scan", err)
		}
		for _, av := range page.Items {
			r, err := decode(av)
			if err != nil {
				return err
			}
			if err := s.fill(ctx, r, av); errors.Is(err, errValueLapsed) {
				continue // past its retention: absent (see errValueLapsed)
			} else if err != nil {
				return err
			}
			if !fn(r) {
				return nil
			}
		}
	}
	return nil
}

var _ ledger.Scanner = (*Store)(nil)
