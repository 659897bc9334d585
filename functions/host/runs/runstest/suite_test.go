package runstest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/runstest"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestMemRuns(t *testing.T) {
	runstest.Run(t, runstest.Harness{NewStore: func(*testing.T) runstest.Store { return runs.NewMemRuns() },
		NewRetaining: func(_ *testing.T, retention time.Duration, now func() time.Time) runstest.Store {
			m := runs.NewMemRuns()
			m.Retention, m.Now = retention, now
			return m
		},
		// A retry's listing and its run are one step in memory: before
		// is never called.
		NewHooked: func(*testing.T, func()) map[string]runstest.Store {
			return map[string]runstest.Store{"memory": runs.NewMemRuns()}
		}})
}

// beforeRunWrite is a client option that calls fn before each write of a
// run's item is sent: a PutItem of one, or a TransactWriteItems holding
// a Put of one.
func beforeRunWrite(fn func()) func(*dynamodb.Options) {
	isRun := func(item map[string]types.AttributeValue) bool { _, ok := runs.RunFromItem(item); return ok }
	return dynamotest.BeforeSend(func(in any) {
		run := false
		switch p := in.(type) {
		case *dynamodb.PutItemInput:
			run = isRun(p.Item)
		case *dynamodb.TransactWriteItemsInput:
			for _, it := range p.TransactItems {
				run = run || (it.Put != nil && isRun(it.Put.Item))
			}
		}
		if run {
			fn()
		}
	})
}

func TestDynamoRuns(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults, counter := dynamotest.NewFaults(), dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, counter.Middleware(), faults.Middleware())
		oldOnFailure := e.Caps.ReturnValuesOnConditionCheckFailure
		runstest.Run(t, runstest.Harness{
			NewStore: func(t *testing.T) runstest.Store {
				faults.Clear()
				t.Cleanup(func() {
					if n := faults.Pending(); n != 0 {
						t.Errorf("%d armed lost answers never happened", n)
					}
				})
				// Told what the engine returns on a refused write, as the
				// kit tells it on DynamoDB (RED_TEAM 521): on moto the
				// suite runs as on DynamoDB, with no read after a refused
				// write of no run.
				return &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), ReturnsOldOnConditionFailure: oldOnFailure}
			},
			NewRetaining: func(t *testing.T, retention time.Duration, now func() time.Time) runstest.Store {
				faults.Clear()
				return &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Retention: retention, Now: now, ReturnsOldOnConditionFailure: oldOnFailure}
			},
			StoredExpiry: func(t *testing.T, st runstest.Store, id string) (int64, bool) {
				t.Helper()
				out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(st.(*runs.DynamoRuns).Table),
					ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}}})
				if err != nil {
					t.Fatalf("get item %s: %v", id, err)
				}
				n, ok := out.Item["expiresAt"].(*types.AttributeValueMemberN)
				if !ok {
					return 0, false
				}
				sec, err := strconv.ParseInt(n.Value, 10, 64)
				if err != nil {
					t.Fatalf("expiresAt %q is not epoch seconds: %v", n.Value, err)
				}
				return sec, true
			},
			Expire: func(t *testing.T, st runstest.Store, id string) {
				t.Helper()
				// RunsTable's TTL deletes the expired run.
				if _, err := c.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(st.(*runs.DynamoRuns).Table),
					Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}}}); err != nil {
					t.Fatalf("delete item %s: %v", id, err)
				}
			},
			NewHooked: func(t *testing.T, before func()) map[string]runstest.Store {
				hooked := e.Client(dynamotest.FastRetries, beforeRunWrite(before))
				out := map[string]runstest.Store{"conditional": &runs.DynamoRuns{Client: hooked, Table: e.CreateTable(t, "RunsTable")}}
				if e.Caps.Transactions {
					out["transactional"] = &runs.DynamoRuns{Client: hooked, Table: e.CreateTable(t, "RunsTable"), Transactional: true}
				}
				return out
			},
			// The write applies, its response is lost, the SDK retries.
			LoseNextAnswer:  func(op string) { faults.FailNextAfterSend(op, 1, dynamotest.ResponseLost()) },
			RoundTrips:      counter.Total,
			ResetRoundTrips: counter.Reset,
		})
	})
}
