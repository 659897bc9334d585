package dynamostore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// A duplicate of a live success whose value item went missing (TTL keeps
// it a day longer than the record, so only a deletion by hand does this)
// gets an error and fires nothing: the effect is never sent again because
// its recorded value cannot be read.
func TestDuplicateOfASuccessWithoutItsValueItemFiresNothing(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		client := e.Client()
		table := e.CreateTable(t, "EffectsTable")
		l, err := ledger.New(ledger.Config{Store: newStore(t, client, table)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		eff := business(t, "beside-missing-1")
		sends := 0
		fn := func(context.Context, ledger.Call) ([]byte, error) { sends++; return make([]byte, 3000), nil }
		r, err := l.Do(ctx, eff, fn)
		if err != nil {
			t.Fatal(err)
		}
		_, deleted := deleteValueItems(t, client, table, r.EffectID)
		if deleted != 1 {
			t.Fatalf("%d value items; want 1", deleted)
		}
		if _, err := l.Do(ctx, eff, fn); err == nil {
			t.Fatal("a duplicate of a success whose value item is gone: no error")
		}
		if sends != 1 {
			t.Fatalf("%d sends; want 1", sends)
		}
	})
}

// deleteValueItems deletes the value item kept beside effectID's record in
// table, as TTL or an operator would, and returns how many items the
// effect had and how many value items were deleted.
func deleteValueItems(t *testing.T, client *dynamodb.Client, table, effectID string) (items, deleted int) {
	t.Helper()
	ctx := context.Background()
	out, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :k"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: "effect#" + effectID}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if it["v"] != nil {
			if _, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
				Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	return len(out.Items), deleted
}
