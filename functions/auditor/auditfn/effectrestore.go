package auditfn

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// EffectTableRestorer is the KeyRestorer of one region's EffectsTable
// replica: one PutItem of the winner's image (an effect record),
// conditional on the item still being the loser as seen (its state, owner
// and attempt), or, loser nil, on there being no item (a record the other
// region's TTL deleted: Auditor.effectDeleted); a failed condition returns
// the item found and writes nothing.
type EffectTableRestorer struct {
	// Client is the region's DynamoDB client. Required.
	Client PutItemAPI
	// Table is the EffectsTable name. Required.
	Table string
}

// Restore implements KeyRestorer.
func (r EffectTableRestorer) Restore(ctx context.Context, winner, loser map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	in := &dynamodb.PutItemInput{TableName: aws.String(r.Table), Item: winner}
	if loser == nil {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": "pk"}
	} else {
		in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = loserCondition(loser)
	}
	return putIf(ctx, r.Client, in, "the effect record")
}

// loserCondition is the condition that the item is still loser as seen:
// its state, owner and attempt each equal to loser's, or absent as in
// loser. values is nil when loser has none of them.
func loserCondition(loser map[string]types.AttributeValue) (cond *string, names map[string]string, values map[string]types.AttributeValue) {
	names = map[string]string{}
	c := ""
	for i, attr := range []string{"state", "owner", "attempt"} {
		n := fmt.Sprintf("#a%d", i)
		names[n] = attr
		if c != "" {
			c += " AND "
		}
		v, ok := loser[attr]
		if !ok {
			c += "attribute_not_exists(" + n + ")"
			continue
		}
		if values == nil {
			values = map[string]types.AttributeValue{}
		}
		values[fmt.Sprintf(":v%d", i)] = v
		c += fmt.Sprintf("%s = :v%d", n, i)
	}
	return aws.String(c), names, values
}
