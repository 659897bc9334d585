package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// claimShape is one write of the claim-shape pass: what the engine spends
// on a Layer-1 claim or a ledger duplicate, taken apart (the table's
// stream and TTL, the condition, the attribute count, the item's bytes,
// the failed write's returned item), each measured beside the plain
// PutItem floor.
type claimShape struct {
	name string
	// write performs the shape's call for the fresh key id.
	write func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error
}

// claimTables are the tables the claim-shape pass writes: idemkit's own
// (from template.yaml: stream NEW_AND_OLD_IMAGES, TTL; the effects table
// also its byRun index), a plain table with the same key and nothing else,
// and the floor's.
type claimTables struct{ idem, effects, plain, floor, streamOnly, ttlOnly, streamNew, streamKeys string }

// Names of the claim-shape pass's rows, in report order.
const (
	shapeFloor           = "plain PutItem floor (2 attributes, 28 bytes)"
	shapeClaimAsSent     = "claim as sent: 10 attributes, condition, idemkit table (stream, TTL)"
	shapeClaimPlainTable = "claim as sent, on a table without stream or TTL"
	shapeClaimStreamOnly = "claim as sent, on a table with the stream (NEW_AND_OLD_IMAGES) and no TTL"
	shapeClaimStreamNew  = "claim as sent, on a table with a NEW_IMAGE stream"
	shapeClaimStreamKeys = "claim as sent, on a table with a KEYS_ONLY stream"
	shapeClaimTTLOnly    = "claim as sent, on a table with TTL and no stream"
	shapeClaimNoCond     = "claim item, no condition, idemkit table"
	shapeClaimPlainPut   = "claim item, no condition, table without stream or TTL (a plain put of the same item)"
	shapeSameBytes       = "2 attributes of the claim's bytes, no condition, plain table (a plain put of the same size)"
	shapeFloorCond       = "floor item with the claim's condition, plain table"
	shapeClaimPacked     = "claim, 7 attributes (the rest packed in one binary), condition, idemkit table"
	shapeClaimShort      = "claim, 10 one-letter attribute names, condition, idemkit table"
	shapeClaimNoNames    = "claim, same condition without attribute names (attribute_not_exists(pk) OR expiresAtMs <= :n)"
	shapeClaimNotExists  = "claim, attribute_not_exists(pk) only (no reclaim of an expired record: not enough)"
	shapeCompleteAsSent  = "completion as sent: whole item, #o = :o AND #s = :p AND NOT #e <= :n, idemkit table"
	shapeCompleteFewer   = "completion, state and retention literal: #o = :o AND #s = :p AND NOT expiresAtMs <= :n"
	shapeCompleteOwner   = "completion, owner only (#o = :o: not enough)"
	shapeCompleteNoCond  = "completion item, no condition, idemkit table"
	shapeFirstExecution  = "Layer-1 first execution (HTTP API adapter, DynamoDB store: claim and completion)"
	shapeLedgerDuplicate = "ledger duplicate (Ledger.Do of a completed effect)"
	shapeDupAsSent       = "ledger duplicate as sent: failed conditional PutItem, ALL_OLD, effects table"
	shapeDupNoOld        = "ledger duplicate without ALL_OLD, effects table"
	shapeDupFloor        = "failed conditional PutItem of the floor item (attribute_not_exists), plain table"
	shapeDupPlainTable   = "ledger duplicate without ALL_OLD, on a table without stream, TTL or index (key pk only)"
	shapeDupSmallEffects = "failed conditional PutItem of a 3-attribute item (pk, sk, v), effects table"
)

func claimShapes() ([]claimShape, func(id string) map[string]types.AttributeValue) {
	now := time.Now()
	nowMs := now.UnixMilli()
	num := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	bin := func(n int) types.AttributeValue { return &types.AttributeValueMemberB{Value: make([]byte, n)} }
	digest := "openwop-request-v1:sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	claimItem := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk": str(id), "digest": str(digest), "state": str("pending"), "owner": str("0123456789abcdef0123456789abcdef"),
			"leaseAt": num(nowMs + 30_000), "renewedAt": num(nowMs), "attempt": num(1), "requestId": str("req-abcdefgh-1234"),
			"expiresAtMs": num(nowMs + 86_400_000), "expiresAt": num(nowMs/1000 + 86_401),
		}
	}
	size := func(m map[string]types.AttributeValue) int {
		n := 0
		for k, v := range m {
			n += len(k)
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				n += len(v.Value)
			case *types.AttributeValueMemberN:
				n += len(v.Value)
			case *types.AttributeValueMemberB:
				n += len(v.Value)
			}
		}
		return n
	}
	claimBytes := size(claimItem("caller:v1:" + strings.Repeat("x", 43)))
	cond := func(ctx context.Context, c *dynamodb.Client, table string, item map[string]types.AttributeValue, e string) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
			ConditionExpression:       aws.String("attribute_not_exists(#k) OR #e <= :n"),
			ExpressionAttributeNames:  map[string]string{"#k": "pk", "#e": e},
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(nowMs)}})
		return err
	}
	plain := func(ctx context.Context, c *dynamodb.Client, table string, item map[string]types.AttributeValue) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		return err
	}
	floorItem := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": str(id), "v": str("x")}
	}
	// dup writes a completed effect record (untimed), then the duplicate's claim.
	dup := func(allOld, plainTable bool) func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
		return func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			table := t.effects
			if plainTable {
				table = t.plain
			}
			in := &dynamodb.PutItemInput{TableName: aws.String(table),
				ConditionExpression:       aws.String("attribute_not_exists(#k) OR #e <= :n"),
				ExpressionAttributeNames:  map[string]string{"#k": "pk", "#e": "expiresAtMs"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(nowMs)}}
			item, err := claimShapeEffect(id)
			if err != nil {
				return err
			}
			in.Item = item
			if allOld {
				in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			}
			_, err = c.PutItem(ctx, in)
			if !isConditionFailed(err) {
				return fmt.Errorf("duplicate claim: want a failed condition, got %v", err)
			}
			return nil
		}
	}
	completed := func(id string) map[string]types.AttributeValue {
		m := claimItem(id)
		delete(m, "leaseAt")
		delete(m, "renewedAt")
		m["state"], m["resp"] = str("completed"), bin(120)
		return m
	}
	complete := func(cond string, names map[string]string, values bool) func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
		return func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			in := &dynamodb.PutItemInput{TableName: aws.String(t.idem), Item: completed(id)}
			if cond != "" {
				in.ConditionExpression = aws.String(cond)
				in.ExpressionAttributeNames = names
				in.ExpressionAttributeValues = map[string]types.AttributeValue{":o": str("0123456789abcdef0123456789abcdef")}
				if values {
					in.ExpressionAttributeValues[":p"], in.ExpressionAttributeValues[":n"] = str("pending"), num(nowMs)
				}
			}
			_, err := c.PutItem(ctx, in)
			return err
		}
	}
	return []claimShape{
		{shapeClaimNoNames, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.idem), Item: claimItem(id),
				ConditionExpression:       aws.String("attribute_not_exists(pk) OR expiresAtMs <= :n"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(nowMs)}})
			return err
		}},
		{shapeClaimNotExists, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.idem), Item: claimItem(id),
				ConditionExpression: aws.String("attribute_not_exists(pk)")})
			return err
		}},
		{shapeCompleteAsSent, complete("#o = :o AND #s = :p AND NOT #e <= :n", map[string]string{"#o": "owner", "#s": "state", "#e": "expiresAtMs"}, true)},
		{shapeCompleteFewer, complete("#o = :o AND #s = :p AND NOT expiresAtMs <= :n", map[string]string{"#o": "owner", "#s": "state"}, true)},
		{shapeCompleteOwner, complete("#o = :o", map[string]string{"#o": "owner"}, false)},
		{shapeCompleteNoCond, complete("", nil, false)},
		{shapeFloor, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return plain(ctx, c, t.floor, floorItem(id))
		}},
		{shapeClaimAsSent, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return cond(ctx, c, t.idem, claimItem(id), "expiresAtMs")
		}},
		{shapeClaimPlainTable, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return cond(ctx, c, t.plain, claimItem(id), "expiresAtMs")
		}},
		{shapeClaimStreamOnly, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return cond(ctx, c, t.streamOnly, claimItem(id), "expiresAtMs")
		}},
		{shapeClaimStreamNew, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return cond(ctx, c, t.streamNew, claimItem(id), "expiresAtMs")
		}},
		{shapeClaimStreamKeys, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return cond(ctx, c, t.streamKeys, claimItem(id), "expiresAtMs")
		}},
		{shapeClaimTTLOnly, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return cond(ctx, c, t.ttlOnly, claimItem(id), "expiresAtMs")
		}},
		{shapeClaimNoCond, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return plain(ctx, c, t.idem, claimItem(id))
		}},
		{shapeClaimPlainPut, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return plain(ctx, c, t.plain, claimItem(id))
		}},
		{shapeSameBytes, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			n := claimBytes - len(id) - 3
			if n < 1 {
				n = 1
			}
			return plain(ctx, c, t.floor, map[string]types.AttributeValue{"pk": str(id), "v": str(strings.Repeat("x", n))})
		}},
		{shapeFloorCond, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return cond(ctx, c, t.plain, floorItem(id), "expiresAtMs")
		}},
		{shapeClaimPacked, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			m := claimItem(id)
			packed := len(digest) + 17 + 8 + 8
			for _, k := range []string{"digest", "leaseAt", "renewedAt", "requestId"} {
				delete(m, k)
			}
			m["d"] = bin(packed)
			return cond(ctx, c, t.idem, m, "expiresAtMs")
		}},
		{shapeClaimShort, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			m := claimItem(id)
			short := map[string]types.AttributeValue{"pk": m["pk"], "expiresAt": m["expiresAt"]}
			letters := map[string]string{"digest": "g", "state": "s", "owner": "o", "leaseAt": "l", "renewedAt": "w",
				"attempt": "a", "requestId": "q", "expiresAtMs": "e"}
			for k, l := range letters {
				short[l] = m[k]
			}
			return cond(ctx, c, t.idem, short, "e")
		}},
		{shapeDupAsSent, dup(true, false)},
		{shapeDupNoOld, dup(false, false)},
		{shapeDupPlainTable, dup(false, true)},
		{shapeDupSmallEffects, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.effects), Item: smallEffect(id),
				ConditionExpression:       aws.String("attribute_not_exists(#k) OR #e <= :n"),
				ExpressionAttributeNames:  map[string]string{"#k": "pk", "#e": "expiresAtMs"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(nowMs)}})
			if !isConditionFailed(err) {
				return fmt.Errorf("want a failed condition, got %v", err)
			}
			return nil
		}},
		{shapeDupFloor, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.plain), Item: floorItem(id),
				ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: map[string]string{"#k": "pk"}})
			if !isConditionFailed(err) {
				return fmt.Errorf("want a failed condition, got %v", err)
			}
			return nil
		}},
	}, claimItem
}

// claimShapeCost runs every shape once per fresh key, the shapes
// interleaved request by request (their order rotating), n keys per
// round, and returns the p50 (µs) of each. The failed-write shapes first
// write their key's item untimed.
func claimShapeCost(ctx context.Context, c *dynamodb.Client, t claimTables, gs *goSystem, n, rounds int) (map[string]float64, error) {
	shapes, pending := claimShapes()
	effects := map[string]ledger.Effect{}
	shapes = append(shapes,
		claimShape{shapeFirstExecution, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			return gs.one(caseFirst, 0, strings.ReplaceAll(id, ":", "-"))
		}},
		claimShape{shapeLedgerDuplicate, func(ctx context.Context, c *dynamodb.Client, t claimTables, id string) error {
			r, err := gs.l.Do(ctx, effects[id], func(context.Context, ledger.Call) ([]byte, error) {
				return nil, errors.New("a duplicate called the provider")
			})
			if err == nil && !r.Replayed {
				err = errors.New("ledger duplicate: not replayed")
			}
			return err
		}})
	lat := timings{}
	for r := 0; r < rounds; r++ {
		for i := 0; i < n; i++ {
			for j := range shapes {
				s := shapes[(i+j)%len(shapes)]
				id := fmt.Sprintf("caller:v1:claimshape-r%d-%06d-%02d-AAAAAAAAAAAAAAAAAAAAAAAA", r, i, (i+j)%len(shapes))
				switch s.name {
				case shapeDupAsSent, shapeDupNoOld, shapeDupPlainTable:
					item, err := claimShapeEffect(id)
					if err != nil {
						return nil, err
					}
					table := t.effects
					if s.name == shapeDupPlainTable {
						table = t.plain
					}
					if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
						return nil, err
					}
				case shapeDupSmallEffects:
					if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.effects), Item: smallEffect(id)}); err != nil {
						return nil, err
					}
				case shapeCompleteAsSent, shapeCompleteFewer, shapeCompleteOwner, shapeCompleteNoCond:
					if err := putClaim(ctx, c, t.idem, pending(id), &types.AttributeValueMemberN{Value: "0"}); err != nil {
						return nil, err
					}
				case shapeLedgerDuplicate:
					run := "acme/run-" + id[len("caller:v1:"):]
					ident, err := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: run, NodeID: "charge", Ordinal: 1, Provider: "stripe"})
					if err != nil {
						return nil, err
					}
					eff := ledger.Effect{Identity: ident, RunID: run, NodeID: "charge"}
					if _, err := gs.l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
						return []byte(`{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","status":"succeeded"}`), nil
					}); err != nil {
						return nil, err
					}
					effects[id] = eff
				case shapeDupFloor:
					if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.plain), Item: map[string]types.AttributeValue{
						"pk": &types.AttributeValueMemberS{Value: id}, "v": &types.AttributeValueMemberS{Value: "x"}}}); err != nil {
						return nil, err
					}
				}
				if err := lat.time(s.name, func() error { return s.write(ctx, c, t, id) }); err != nil {
					return nil, err
				}
			}
		}
	}
	return lat.p50(), nil
}

// claimShapeEffect is the stored completed effect record the duplicate
// shapes collide with (the same record their claim sends).
func claimShapeEffect(id string) (map[string]types.AttributeValue, error) {
	now := time.Now()
	run := "acme/run-" + id
	return ledgerdynamo.EncodeRecord(&ledger.Record{Key: "effect#acme/" + id, Kind: identity.KindEffect, EffectID: "acme/" + id, Tenant: "acme",
		Keying: identity.KeyingActivityRecipe, IdentityRecipe: identity.ActivityRecipe,
		ProviderKey: "idemkit-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", RunID: run,
		State: ledger.StateCompleted, Owner: "0123456789abcdef0123456789abcdef", Attempt: 1,
		Attempts:  []ledger.Attempt{{N: 1, State: ledger.AttemptCompleted, At: now, RunID: run, NodeID: "charge", InvocationID: "inv-0123456789", Fired: true, FiredAt: now}},
		Outcome:   &ledger.Outcome{OK: true, Value: []byte(`{"ok":true}`)},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)})
}

// smallEffect is a stored effects-table item with the key and one short
// attribute only: what a failed claim on the effects table costs without
// the record's attributes.
func smallEffect(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "effect#acme/" + id},
		"sk": &types.AttributeValueMemberS{Value: "r"}, "v": &types.AttributeValueMemberS{Value: "x"}}
}

// claimShapeNames lists the claim-shape pass's rows in report order.
var claimShapeNames = []string{shapeFloor, shapeFirstExecution, shapeLedgerDuplicate, shapeClaimAsSent, shapeClaimPlainTable, shapeClaimStreamOnly, shapeClaimStreamNew, shapeClaimStreamKeys, shapeClaimTTLOnly, shapeClaimNoCond, shapeClaimPlainPut,
	shapeSameBytes, shapeFloorCond, shapeClaimPacked, shapeClaimShort, shapeClaimNoNames, shapeClaimNotExists,
	shapeCompleteAsSent, shapeCompleteFewer, shapeCompleteOwner, shapeCompleteNoCond, shapeDupAsSent, shapeDupNoOld, shapeDupPlainTable, shapeDupSmallEffects, shapeDupFloor}

// isConditionFailed reports whether err is DynamoDB's failed condition.
func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}
