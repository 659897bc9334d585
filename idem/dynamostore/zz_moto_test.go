package dynamostore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestZZMotoAtomic(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "IdempotencyTable")
		c := e.Client()
		bad := 0
		for round := 0; round < 30; round++ {
			pk := fmt.Sprintf("k%d", round)
			c.PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "owner": &types.AttributeValueMemberS{Value: "crashed"}}})
			var won atomic.Int32
			var wg sync.WaitGroup
			for w := 0; w < 32; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					_, err := c.UpdateItem(ctxT(t), &dynamodb.UpdateItemInput{TableName: aws.String(table),
						Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
						ConditionExpression:       aws.String("#o = :old"),
						UpdateExpression:          aws.String("SET #o = :new"),
						ExpressionAttributeNames:  map[string]string{"#o": "owner"},
						ExpressionAttributeValues: map[string]types.AttributeValue{":old": &types.AttributeValueMemberS{Value: "crashed"}, ":new": &types.AttributeValueMemberS{Value: fmt.Sprint(w)}},
					})
					if err == nil {
						won.Add(1)
					}
				}(w)
			}
			wg.Wait()
			if won.Load() != 1 {
				bad++
				t.Logf("round %d: %d winners", round, won.Load())
			}
		}
		if bad > 0 {
			t.Errorf("%d/30 rounds with != 1 winner", bad)
		}
	})
}
