package dynamostore

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
)

// Precomputed expressions of the hot path (claim and completion).
//
// They are written once, by hand, instead of with the expression builder on
// every call: building them cost more client CPU than the rest of the store,
// and the builder's output (every operand parenthesised, attribute_not_exists
// inside an OR) is what the emulators spend most of a write on parsing — on
// dynalite a completion with the builder's condition took three times a
// plain PutItem, with this one about 1.2 times (docs/performance-history.md). The
// rarer writes (reclaim, release, renew, delete) still use the builder.
//
// The name maps are shared and never modified (the SDK only reads them).

var (
	// condFresh: no record, or one past its retention (TTL deletes lazily).
	condFresh  = aws.String("attribute_not_exists(#k) OR #e <= :n")
	namesFresh = map[string]string{"#k": attrPK, "#e": attrExpMs}

	// condOwned: the live pending record of owner :o (the fence every write
	// after the claim carries). "NOT #e <= :n" is "expiresAtMs absent (no
	// retention) or after now": a comparison with an absent attribute is
	// false, so its negation holds; it avoids an OR, which the emulators
	// parse slowly.
	condOwned = aws.String("#o = :o AND #s = :p AND NOT #e <= :n")

	// namesOwned names the attributes condOwned reads. A completion is a
	// whole-item PutItem under condOwned (completedItem): on the emulators
	// a conditional PutItem of the completed record costs less than an
	// UpdateItem setting its few attributes (docs/performance-history.md).
	namesOwned = map[string]string{"#o": attrOwner, "#s": attrState, "#e": attrExpMs}

	avPending = avS(string(idem.StatePending))
)

// writeExpr is one conditional write's expressions.
type writeExpr struct {
	cond, update *string
	names        map[string]string
	values       map[string]types.AttributeValue
}

// exprOf is the writeExpr of a built expression.
func exprOf(e expression.Expression) writeExpr {
	return writeExpr{cond: e.Condition(), update: e.Update(), names: e.Names(), values: e.Values()}
}

// conditional is the update of the item key in table by w, returning the
// item as it was when the condition fails.
func (w writeExpr) conditional(table *string, key map[string]types.AttributeValue) *types.Update {
	return &types.Update{
		TableName:                           table,
		Key:                                 key,
		ConditionExpression:                 w.cond,
		UpdateExpression:                    w.update,
		ExpressionAttributeNames:            w.names,
		ExpressionAttributeValues:           w.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
