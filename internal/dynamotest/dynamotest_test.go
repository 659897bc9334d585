package dynamotest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// TestCapabilities checks the documented capabilities of each emulator
// against what it actually does.
func TestCapabilities(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		got, err := dynamotest.Probe(ctx(t), e)
		if err != nil {
			t.Fatal(err)
		}
		if got != e.Caps {
			t.Errorf("%s: probed %+v, documented %+v", e.Kind, got, e.Caps)
		}
		t.Logf("%s capabilities: %+v", e.Kind, got)
	})
}

func TestSharedPerProcess(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		if e2 := dynamotest.Start(t, e.Kind); e2 != e {
			t.Errorf("second Start returned a different emulator")
		}
	})
}

// TestTemplateTables creates every DynamoDB resource of template.yaml and
// checks the created shape.
func TestTemplateTables(t *testing.T) {
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		for id, d := range defs {
			name := e.CreateTable(t, id)
			out, err := c.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			tb := out.Table
			if tb.TableStatus != types.TableStatusActive || len(tb.KeySchema) != len(d.KeySchema) ||
				len(tb.GlobalSecondaryIndexes) != len(d.GlobalSecondaryIndexes) {
				t.Errorf("%s: %+v", id, tb)
			}
			if e.Caps.Streams && (d.StreamViewType != "") != (tb.LatestStreamArn != nil) {
				t.Errorf("%s: stream %v, want view %q", id, tb.LatestStreamArn, d.StreamViewType)
			}
			if e.Caps.TTL && !e.DeletesExpired && d.TTLAttribute != "" {
				ttl, err := c.DescribeTimeToLive(ctx(t), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
				if err != nil {
					t.Fatal(err)
				}
				if aws.ToString(ttl.TimeToLiveDescription.AttributeName) != d.TTLAttribute {
					t.Errorf("%s: TTL %+v", id, ttl.TimeToLiveDescription)
				}
			}
		}
	})
}

// TestRegionsAreIndependent: moto keeps one set of tables per region on
// one server (InRegion relies on it); DynamoDB Local, started with
// -sharedDb, keeps one set for every region and every access key.
func TestRegionsAreIndependent(t *testing.T) {
	t.Run(dynamotest.Moto, func(t *testing.T) { testRegionsAreIndependent(t, dynamotest.Start(t, dynamotest.Moto)) })
	t.Run(dynamotest.DynamoDBLocal, func(t *testing.T) {
		e := dynamotest.Start(t, dynamotest.DynamoDBLocal)
		name := e.CreateTable(t, "FenceTable")
		other := e.InRegion("eu-west-1").Client(func(o *dynamodb.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("someone-else", "x", "")
		})
		if _, err := other.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err != nil {
			t.Fatalf("another region and access key do not see the table: %v", err)
		}
	})
}

func testRegionsAreIndependent(t *testing.T, e *dynamotest.Emulator) {
	a := e.CreateTable(t, "FenceTable")
	b := e.InRegion("eu-west-1")
	if _, err := b.Client().DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(a)}); err == nil {
		t.Fatal("table of us-east-1 visible in eu-west-1")
	}
	bn := b.CreateTable(t, "FenceTable")
	if _, err := b.Client().DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(bn)}); err != nil {
		t.Fatal(err)
	}
}

func put(pk string) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}
}

func TestCounterAndFaults(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		name := e.CreateTable(t, "FenceTable")
		cnt := dynamotest.NewCounter()
		f := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, f.Middleware(), cnt.Middleware())
		in := func(pk string) *dynamodb.PutItemInput {
			p := put(pk)
			p.TableName = aws.String(name)
			return p
		}

		// Plain call: one call, one round trip.
		if _, err := c.PutItem(ctx(t), in("a")); err != nil {
			t.Fatal(err)
		}
		if cnt.Total() != 1 || cnt.Calls() != 1 || cnt.Ops()["PutItem"] != 1 {
			t.Fatalf("trips %v calls %v", cnt.Ops(), cnt.CallOps())
		}

		// A throttle before sending is retried by the SDK: one call, one
		// round trip (the failed attempt never reached the server).
		cnt.Reset()
		f.FailNext("PutItem", 1, dynamotest.Throttle())
		if _, err := c.PutItem(ctx(t), in("b")); err != nil {
			t.Fatal(err)
		}
		if cnt.Total() != 1 || cnt.Calls() != 1 || f.Fired() != 1 || f.Pending() != 0 {
			t.Fatalf("throttle: trips %d calls %d fired %d", cnt.Total(), cnt.Calls(), f.Fired())
		}

		// Persistent throttling exhausts the 3 attempts.
		cnt.Reset()
		f.FailNext("PutItem", 5, dynamotest.Throttle())
		_, err := c.PutItem(ctx(t), in("c"))
		var ae interface{ ErrorCode() string }
		if !errors.As(err, &ae) || ae.ErrorCode() != "ProvisionedThroughputExceededException" {
			t.Fatalf("want throttle error, got %v", err)
		}
		if cnt.Total() != 0 || f.Pending() != 2 {
			t.Fatalf("trips %d pending %d", cnt.Total(), f.Pending())
		}
		f.Clear()

		// A non-retryable injected error is returned as is, nothing written.
		boom := errors.New("boom")
		f.FailNext(dynamotest.AnyOp, 1, boom)
		if _, err := c.PutItem(ctx(t), in("d")); !errors.Is(err, boom) {
			t.Fatalf("want boom, got %v", err)
		}
		if _, err := c.PutItem(ctx(t), in("d")); err != nil {
			t.Fatalf("d was written by the failed call: %v", err)
		}

		// Applied, response lost: the SDK retries; the retry meets the
		// applied write (condition fails). Two round trips, one call.
		cnt.Reset()
		f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		_, err = c.PutItem(ctx(t), in("e"))
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("want ConditionalCheckFailed on the retry of an applied write, got %v", err)
		}
		if cnt.Total() != 2 || cnt.Calls() != 1 {
			t.Fatalf("lost response: trips %d calls %d", cnt.Total(), cnt.Calls())
		}

		// Other operations are untouched by an op-specific rule.
		f.FailNext("DeleteItem", 1, boom)
		if _, err := c.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(name),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "e"}}}); err != nil {
			t.Fatal(err)
		}
		if f.Pending() != 1 {
			t.Fatalf("pending %d", f.Pending())
		}
	})
}

// TestConditionalWritesAreAtomic: of 32 concurrent conditional updates of
// one item exactly one succeeds, as in DynamoDB. Bare moto fails this
// (occasionally two winners); the harness serializes requests to it.
func TestConditionalWritesAreAtomic(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "FenceTable")
		c := e.Client()
		for round := 0; round < 20; round++ {
			pk := fmt.Sprintf("k%d", round)
			if _, err := c.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: pk}, "owner": &types.AttributeValueMemberS{Value: "old"}}}); err != nil {
				t.Fatal(err)
			}
			var won atomic.Int32
			var wg sync.WaitGroup
			for w := 0; w < 32; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					_, err := c.UpdateItem(ctx(t), &dynamodb.UpdateItemInput{
						TableName:                 aws.String(table),
						Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
						ConditionExpression:       aws.String("#o = :old"),
						UpdateExpression:          aws.String("SET #o = :new"),
						ExpressionAttributeNames:  map[string]string{"#o": "owner"},
						ExpressionAttributeValues: map[string]types.AttributeValue{":old": &types.AttributeValueMemberS{Value: "old"}, ":new": &types.AttributeValueMemberS{Value: fmt.Sprint(w)}},
					})
					if err == nil {
						won.Add(1)
					}
				}(w)
			}
			wg.Wait()
			if n := won.Load(); n != 1 {
				t.Fatalf("round %d: %d winners, want exactly 1", round, n)
			}
		}
	})
}

// fatalTB records Fatalf and Skipf instead of ending the test.
type fatalTB struct {
	testing.TB
	fatal, skipped string
}

func (f *fatalTB) Helper()                        {}
func (f *fatalTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...); panic(f) }
func (f *fatalTB) Skipf(format string, a ...any)  { f.skipped = fmt.Sprintf(format, a...); panic(f) }

// TestUnknownKindFailsTheTest: a kind that is not in the engine table (a
// typo in DYNAMOTEST_KINDS) fails the test, even outside CI, instead of
// skipping it or starting another engine.
func TestUnknownKindFailsTheTest(t *testing.T) {
	t.Setenv("CI", "")
	f := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != any(f) {
				panic(r)
			}
		}()
		dynamotest.Start(f, "dynamo-local")
	}()
	if f.skipped != "" || !strings.Contains(f.fatal, "unknown emulator kind") {
		t.Fatalf("fatal %q, skipped %q", f.fatal, f.skipped)
	}
}

// TestLostAnswerLeavesNothingInTheRetrysResult (RED_TEAM 355): the SDK
// decodes every attempt of one call into the same output value, so an
// answer FailNextAfterSend "lost" was decoded before it was dropped, and
// the fields its retry's answer does not set kept the lost answer's: a
// DeleteItem with ReturnValues ALL_OLD whose answer was lost returned the
// deleted item, as no lost answer does. The caller sees the retry's
// answer alone. On the emulators.
func TestLostAnswerLeavesNothingInTheRetrysResult(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		name := e.CreateTable(t, "FenceTable")
		f := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, f.Middleware())
		p := put("gone")
		p.TableName = aws.String(name)
		if _, err := c.PutItem(ctx(t), p); err != nil {
			t.Fatal(err)
		}
		f.FailNextAfterSend("DeleteItem", 1, dynamotest.ResponseLost())
		out, err := c.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(name), Key: p.Item, ReturnValues: types.ReturnValueAllOld})
		if err != nil || f.Fired() != 1 {
			t.Fatalf("%v (fired %d)", err, f.Fired())
		}
		if len(out.Attributes) != 0 {
			t.Fatalf("a delete whose answer was lost returned the deleted item %v; want the retry's answer, which finds none", out.Attributes)
		}
	})
}
