package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrNoCapacity is EngineItemSize's answer on an engine that reports no
// consumed capacity (moto): it cannot tell what the engine would bill.
var ErrNoCapacity = errors.New("dynamotest: the engine reports no consumed capacity")

// probePad is the attribute EngineItemSize pads a copy of the item with.
const probePad = "~pad"

// EngineItemSize is the size in bytes the engine behind c gives item (a
// complete item of table, key attributes included, keys naming them), read
// from the write units the engine reports for the table itself (not its
// indexes): a copy of item under a key of the same byte length, padded
// with a binary attribute, is written with ReturnConsumedCapacity until
// the largest pad still billed the copy's first count of write units is
// found (a write unit covers 1,024 bytes), so the item's size is that
// count's bytes less the pad. Each copy is written to an absent key
// (deleted before and after), so no existing item enters the bill. About
// 26 calls. It answers ErrNoCapacity on an engine that reports no
// consumed capacity, or none that follows the item's size (moto); it is
// meant for the engines whose sizes are the reference, DynamoDB Local
// (AWS's own engine) and dynalite. The item itself is left as it was.
func EngineItemSize(ctx context.Context, c *dynamodb.Client, table string, item map[string]types.AttributeValue, keys ...string) (int, error) {
	probe := make(map[string]types.AttributeValue, len(item)+1)
	for k, v := range item {
		probe[k] = v
	}
	key := map[string]types.AttributeValue{}
	for _, k := range keys {
		s, ok := item[k].(*types.AttributeValueMemberS)
		if !ok {
			return 0, fmt.Errorf("dynamotest: EngineItemSize: key attribute %q is not a string", k)
		}
		// Same byte length, another key: a string of '~' (0x7e) no
		// test writes.
		probe[k] = &types.AttributeValueMemberS{Value: strings.Repeat("~", len(s.Value))}
		key[k] = probe[k]
	}
	units := func(pad int) (float64, error) {
		if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
			return 0, err
		}
		probe[probePad] = &types.AttributeValueMemberB{Value: make([]byte, pad)}
		out, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: probe,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		if err != nil {
			return 0, err
		}
		cc := out.ConsumedCapacity
		switch {
		case cc == nil:
			return 0, ErrNoCapacity
		case cc.Table != nil && cc.Table.CapacityUnits != nil:
			return *cc.Table.CapacityUnits, nil
		case cc.CapacityUnits != nil && len(cc.GlobalSecondaryIndexes) == 0:
			return *cc.CapacityUnits, nil
		}
		return 0, ErrNoCapacity
	}
	defer func() {
		_, _ = c.DeleteItem(context.WithoutCancel(ctx), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
	}()
	u, err := units(1)
	if err != nil {
		return 0, err
	}
	// A pad of 1,025 bytes is billed one unit more than a pad of 1 on an
	// engine that bills by size; moto answers a constant.
	if top, err := units(1025); err != nil {
		return 0, err
	} else if u <= 0 || top != u+1 {
		return 0, ErrNoCapacity
	}
	// The largest pad in [1, 1024] billed u units.
	lo, hi := 1, 1024
	for lo < hi {
		mid := (lo + hi + 1) / 2
		m, err := units(mid)
		if err != nil {
			return 0, err
		}
		if m <= u {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return int(u)*1024 - len(probePad) - lo, nil
}
