package dynamostore_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func newStore(t testing.TB, c dynamostore.API, table string) *dynamostore.Store {
	t.Helper()
	s, err := dynamostore.New(dynamostore.Config{Client: c, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// businessPut is a transactional business write: create item name in table
// if absent.
func businessPut(table, name string) types.TransactWriteItem {
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("pk"))).Build()
	if err != nil {
		panic(err)
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                aws.String(table),
		Item:                     map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: name}},
		ConditionExpression:      cond.Condition(),
		ExpressionAttributeNames: cond.Names(),
	}}
}

func businessExists(t testing.TB, c *dynamodb.Client, table, name string) bool {
	t.Helper()
	out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: name}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item != nil
}

// TestConformance runs the idem.Store conformance suite (including the
// 32 goroutines x 100 keys exactly-one-winner test) against moto and
// dynalite. The transactional-completion cases run where the emulator has
// transactions (moto); dynalite's typed refusal is TestNoTransactions.
func TestConformance(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "IdempotencyTable")
		c := e.Client()
		h := idemtest.Harness{NewStore: func(t *testing.T) idem.Store { return newStore(t, c, table) }}
		// Unavailable: every attempt of every call throttled, after the
		// SDK's retries (fast ones).
		// A chunk item of the record's response lost: the last one.
		h.LosePartOfResponse = func(t *testing.T, _ idem.Store, id string) {
			loseChunk(t, c, table, id)
		}
		h.Unavailable = func(t *testing.T) idem.Store {
			f := dynamotest.NewFaults()
			f.FailNext(dynamotest.AnyOp, math.MaxInt32, dynamotest.Throttle())
			return newStore(t, e.Client(dynamotest.FastRetries, f.Middleware()), table)
		}
		// A response part beside the record not written: every chunk
		// item's PutItem throttled, after the SDK's retries.
		h.FailBesideRecord = func(t *testing.T) idem.Store {
			f := dynamotest.NewFaults()
			f.FailNextIf("PutItem", math.MaxInt32, dynamotest.Throttle(), chunkPut)
			return newStore(t, e.Client(dynamotest.FastRetries, f.Middleware()), table)
		}
		if e.Caps.Transactions {
			biz := e.CreateTable(t, "RunsTable")
			h.TxWrites = &idemtest.TxWrites{
				Put: func(t *testing.T, s idem.Store, name string) any { return businessPut(biz, name) },
				Exists: func(t *testing.T, s idem.Store, name string) bool {
					return businessExists(t, c, biz, name)
				},
			}
		}
		idemtest.Run(t, h)
	})
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// loseChunk deletes the last chunk item of the response record id
// references, as an engine that lost it would.
func loseChunk(t *testing.T, c *dynamodb.Client, table, id string) {
	t.Helper()
	out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	nonce, ok := out.Item["respNonce"].(*types.AttributeValueMemberS)
	n, ok2 := out.Item["respChunks"].(*types.AttributeValueMemberN)
	if !ok || !ok2 {
		t.Fatalf("record %s has no chunked response: %v", id, out.Item)
	}
	key := "chunk:v1:" + strings.TrimPrefix(id, keyspace.CallerPrefix) + ":" + nonce.Value + ":"
	last, err := strconv.Atoi(n.Value)
	if err != nil || last < 1 {
		t.Fatalf("respChunks %q", n.Value)
	}
	del, err := c.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
		TableName:    aws.String(table),
		Key:          map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key + strconv.Itoa(last-1)}},
		ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil {
		t.Fatal(err)
	}
	if del.Attributes == nil {
		t.Fatalf("chunk %d of %s was not there", last-1, id)
	}
}

// chunkPut reports whether in, a call's input, is the PutItem of a
// response's chunk item (for dynamotest.Faults.FailNextIf).
func chunkPut(in any) bool {
	p, ok := in.(*dynamodb.PutItemInput)
	if !ok {
		return false
	}
	pk, _ := p.Item["pk"].(*types.AttributeValueMemberS)
	return pk != nil && strings.HasPrefix(pk.Value, "chunk:")
}
