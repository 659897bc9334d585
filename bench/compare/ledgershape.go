package main

import (
	"context"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// Ledger write shapes: the fire mark of a freshly claimed effect record
// (the store's own claim item), written as the whole record with a
// conditional PutItem (what Store.Replace sends) and as narrow conditional
// UpdateItems carrying only what the fire mark changes. Same condition in
// every shape (owner, attempt, state, retention).
const (
	shapeLedgerClaim = "ledger claim PutItem (whole compact record; without a Fencer also the fire mark)"
	shapeLedgerPut   = "ledger fire mark with a Fencer / outcome: whole-record conditional PutItem (Store.Replace)"
	shapeLedgerRow   = "ledger fire mark: UpdateItem, 4 SET + the packed attribute"
	shapeLedgerFew   = "ledger fire mark: UpdateItem, 4 SET, no packed attribute (not enough)"
)

var ledgerShapeNames = []string{shapeLedgerClaim, shapeLedgerPut, shapeLedgerRow, shapeLedgerFew}

// ledgerShapeCost times each fire-mark shape on n fresh claimed records
// per round (rounds interleaved) and returns the p50 (µs) of each and of
// the claim.
func ledgerShapeCost(ctx context.Context, c *dynamodb.Client, table string, n, rounds int) (map[string]float64, error) {
	now := time.Now()
	nowMs := now.UnixMilli()
	num := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	record := func(id string) *ledger.Record {
		run := "acme/run-" + id
		return &ledger.Record{Key: "effect#acme/" + id, Kind: identity.KindEffect, EffectID: "acme/" + id, Tenant: "acme",
			Keying: identity.KeyingActivityRecipe, IdentityRecipe: identity.ActivityRecipe,
			ProviderKey: "idemkit-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", RunID: run,
			State: ledger.StateClaimed, Owner: "0123456789abcdef0123456789abcdef", Attempt: 1, LeaseUntil: now.Add(time.Minute),
			Attempts:  []ledger.Attempt{{N: 1, State: ledger.AttemptClaimed, At: now, RunID: run, NodeID: "charge", InvocationID: "inv-0123456789"}},
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	}
	cond := aws.String("#o = :o AND #a = :a AND #s = :s AND #e > :n")
	condValues := func(owner string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{":o": str(owner), ":a": num(1), ":s": str(string(ledger.StateClaimed)), ":n": num(nowMs)}
	}
	lat := timings{}
	for r := 0; r < rounds; r++ {
		for si, shape := range ledgerShapeNames[1:] {
			for i := 0; i < n; i++ {
				rec := record(fmt.Sprintf("shape-r%d-s%d-%06d-AAAAAAAAAAAA", r, si, i))
				claim, err := ledgerdynamo.EncodeRecord(rec)
				if err != nil {
					return nil, err
				}
				if err := lat.time(shapeLedgerClaim, func() error {
					return putClaim(ctx, c, table, claim, num(nowMs))
				}); err != nil {
					return nil, err
				}
				next := rec.Clone()
				next.State, next.LeaseUntil, next.UpdatedAt = ledger.StateFiring, now.Add(2*time.Minute), now.Add(time.Millisecond)
				next.Attempts[0].Fired, next.Attempts[0].FiredAt = true, now.Add(time.Millisecond)
				whole, err := ledgerdynamo.EncodeRecord(next)
				if err != nil {
					return nil, err
				}
				names := map[string]string{"#o": "owner", "#a": "attempt", "#s": "state", "#e": "expiresAtMs"}
				values := condValues(rec.Owner)
				if err := lat.time(shape, func() error {
					if shape == shapeLedgerPut {
						_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: whole,
							ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values})
						return err
					}
					upd := "SET #s = :S, #l = :l, #e = :e, #t = :t"
					names["#l"], names["#t"] = "leaseUntil", "expiresAt"
					values[":S"], values[":l"] = str(string(ledger.StateFiring)), whole["leaseUntil"]
					values[":e"], values[":t"] = whole["expiresAtMs"], whole["expiresAt"]
					if shape == shapeLedgerRow {
						upd += ", #D = :r"
						names["#D"], values[":r"] = ledgerdynamo.PackedAttribute, whole[ledgerdynamo.PackedAttribute]
					}
					_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
						Key:                 map[string]types.AttributeValue{"pk": str(rec.Key), "sk": str("record")},
						ConditionExpression: cond, UpdateExpression: aws.String(upd),
						ExpressionAttributeNames: names, ExpressionAttributeValues: values})
					return err
				}); err != nil {
					return nil, err
				}
			}
		}
	}
	return lat.p50(), nil
}
