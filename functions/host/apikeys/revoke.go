package apikeys

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/awserr"
)

// ErrKeyNotFound is returned by Revoke when the table holds no key of the
// hash (already revoked, or another table).
var ErrKeyNotFound = errors.New("host: no api key of this hash")

// ErrKeyOtherTenant is returned (wrapped, with the key's tenant) by Revoke
// when the key belongs to another tenant than the one it was told; nothing
// is revoked.
var ErrKeyOtherTenant = errors.New("host: the api key belongs to another tenant")

// RevokeAPI is the subset of *dynamodb.Client Revoke uses.
type RevokeAPI interface {
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// ValidHash reports whether h is a key's stored form, as HashKey returns
// it: "key#" and 64 lower-case hex digits.
func ValidHash(h string) bool {
	hx, ok := strings.CutPrefix(h, "key#")
	if !ok || len(hx) != 64 {
		return false
	}
	for i := 0; i < len(hx); i++ {
		if c := hx[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Revoke deletes the key whose HashKey is hash from the api-keys table and
// returns the tenant it authenticated. The authorizer reads keys strongly
// consistently, so its next lookup refuses the key; a decision API Gateway
// already cached (the HTTP API's ReauthorizeEvery) is kept until it
// expires. With tenant set, the key is deleted only if it is that
// tenant's (else ErrKeyOtherTenant). A key that is not there is
// ErrKeyNotFound. One conditional DeleteItem; a refused one is followed by
// one GetItem that says why. When the SDK sent the delete again after a
// try that got no answer, the error has ErrAnswerLost joined: that try
// may have deleted the key, and the retry's refusal (ErrKeyNotFound) then
// says only that the key is gone (RED_TEAM 364); a delete whose retries
// then failed reads the item once: gone, the same. The SDK's record of its
// tries says so: no round trip is added to a revoke that succeeds.
func Revoke(ctx context.Context, c RevokeAPI, table, hash, tenant string) (string, error) {
	cond := expression.AttributeExists(expression.Name("pk"))
	if tenant != "" {
		cond = cond.And(expression.Name("tenant").Equal(expression.Value(tenant)))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return "", err
	}
	key := map[string]types.AttributeValue{"pk": sAV(hash)}
	var tries awserr.Tries
	out, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(table), Key: key,
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueAllOld,
	}, tries.Option)
	if err != nil && tries.Lost() {
		if !errors.As(err, new(*types.ConditionalCheckFailedException)) {
			// The retries failed: one read says whether the lost try
			// deleted it (RED_TEAM 366).
			// Not when the last try got no answer either: the engine does
			// not answer, and the read would wait as long again.
			if !awserr.Unanswered(err) {
				got, gerr := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
				if gerr == nil && len(got.Item) == 0 {
					return "", lostError{ErrKeyNotFound}
				}
			}
			return "", lostError{fmt.Errorf("host: delete api key: %w", err)}
		}
		owner, err := refused(ctx, c, table, key, err)
		if errors.Is(err, ErrKeyOtherTenant) {
			return owner, err // the lost try's condition failed as well
		}
		return owner, lostError{err}
	}
	if err != nil {
		return refused(ctx, c, table, key, err)
	}
	t, _ := out.Attributes["tenant"].(*types.AttributeValueMemberS)
	if t == nil {
		return "", nil
	}
	return t.Value, nil
}

// refused says why Revoke's delete failed with err: for a refusal by its
// condition, one GetItem tells another tenant's key (ErrKeyOtherTenant)
// from none (ErrKeyNotFound).
func refused(ctx context.Context, c RevokeAPI, table string, key map[string]types.AttributeValue, err error) (string, error) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		got, gerr := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return "", fmt.Errorf("host: get api key: %w", gerr)
		}
		if t, ok := got.Item["tenant"].(*types.AttributeValueMemberS); ok && len(got.Item) > 0 {
			return t.Value, fmt.Errorf("%w (%s)", ErrKeyOtherTenant, t.Value)
		}
		return "", ErrKeyNotFound
	}
	return "", fmt.Errorf("host: delete api key: %w", err)
}
