package devstack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/testutil"
)

// woken reports, for each name, whether its wake channel holds a wake-up,
// and empties it.
func woken(chans map[string]chan struct{}) map[string]bool {
	got := map[string]bool{}
	for name, c := range chans {
		select {
		case <-c:
			got[name] = true
		default:
			got[name] = false
		}
	}
	return got
}

// TestWritesWakeOnlyTheirTablesPollers: the stack's DynamoDB client wakes
// the poller of each table a write named once the engine answered it —
// PutItem, UpdateItem, DeleteItem, BatchWriteItem, each item of
// TransactWriteItems — and no other; a read, a failed condition and a
// cancelled transaction (nothing written) wake none.
func TestWritesWakeOnlyTheirTablesPollers(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		tw := newTableWaker()
		c := e.Client(tw.option)
		chans := map[string]chan struct{}{}
		names := map[string]string{}
		for _, id := range []string{"RunsTable", "EffectsTable", "IdempotencyTable"} {
			names[id] = e.CreateTable(t, id)
			chans[id] = make(chan struct{}, 1)
			tw.register(names[id], chans[id])
		}
		item := func(pk string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
		}
		expect := func(what string, want ...string) {
			t.Helper()
			got := woken(chans)
			for id := range chans {
				should := false
				for _, w := range want {
					should = should || w == id
				}
				if got[id] != should {
					t.Errorf("%s: %s's poller woken %v, want %v", what, id, got[id], should)
				}
			}
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		runs, effects, idem := names["RunsTable"], names["EffectsTable"], names["IdempotencyTable"]
		effect := func(pk string) map[string]types.AttributeValue { // the effects table's key: pk and sk
			k := item(pk)
			k["sk"] = &types.AttributeValueMemberS{Value: "s"}
			return k
		}

		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(runs), Item: item("a")})
		must(err)
		expect("PutItem to the runs table", "RunsTable")

		_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(runs), Item: item("a"),
			ConditionExpression: aws.String("attribute_not_exists(pk)")})
		if err == nil {
			t.Fatal("a duplicate conditional PutItem succeeded")
		}
		expect("a failed conditional PutItem")

		_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(runs), Key: item("a"), ConsistentRead: aws.Bool(true)})
		must(err)
		expect("GetItem")

		_, err = c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(effects), Key: effect("e"),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "1"}}})
		must(err)
		expect("UpdateItem of the effects table", "EffectsTable")

		_, err = c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(effects), Key: effect("e")})
		must(err)
		expect("DeleteItem of the effects table", "EffectsTable")

		_, err = c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
			idem: {{PutRequest: &types.PutRequest{Item: item("b")}}},
			runs: {{PutRequest: &types.PutRequest{Item: item("b2")}}},
		}})
		must(err)
		expect("BatchWriteItem of the idempotency and runs tables", "IdempotencyTable", "RunsTable")

		if !e.Caps.Transactions {
			return
		}
		_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(idem), Item: item("c")}},
			{Put: &types.Put{TableName: aws.String(runs), Item: item("c")}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(effects), Key: effect("none"), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}})
		must(err)
		expect("TransactWriteItems putting to the idempotency and runs tables", "IdempotencyTable", "RunsTable")

		_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(idem), Item: item("c"), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			{Put: &types.Put{TableName: aws.String(runs), Item: item("d")}},
		}})
		if err == nil {
			t.Fatal("a transaction whose condition fails succeeded")
		}
		expect("a cancelled TransactWriteItems")
	})
}

// TestNewRunWakesOnlyThePollersOfTheTablesItWrote: a new-key POST /runs
// through the stack's gateway (the claim and the completion with the run)
// wakes the idempotency and runs pollers and leaves the effects poller
// idle: a run that records no effect costs its empty stream no poll. The
// stack is wired as `idemkit dev` wires it; its pollers are not started, so
// the wake-ups stay where the test can see them.
func TestNewRunWakesOnlyThePollersOfTheTablesItWrote(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const key = "idk_wake_test_0123456789"
		o, err := Options{Endpoint: e.Endpoint, TablePrefix: fmt.Sprintf("wake%d-", time.Now().UnixNano()), APIKeys: []string{key + "=acme"},
			Getenv: func(string) string { return "" }}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		eng, err := startEngine(ctx, o, logger)
		if err != nil {
			t.Fatal(err)
		}
		defer eng.stop()
		tw := newTableWaker()
		client := emulator.Client(eng.endpoint, watchStore, tw.option)
		_, env, err := devTables(ctx, client, o, eng.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		st, err := newStack(ctx, o, io.Discard, logger, "http://dev", client, tw, eng, env)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.pollers) != 3 {
			t.Fatalf("%d pollers, want the runs, effects and idempotency streams'", len(st.pollers))
		}
		// The wake channels the pollers would wait on (set up, no wake-up
		// pending: seeding the keys writes only the api-keys table).
		wakes := map[string]<-chan struct{}{}
		for _, p := range st.pollers {
			wakes[p.name] = p.wake
			select {
			case <-p.wake:
				t.Fatalf("the %s poller was woken before any request", p.name)
			default:
			}
		}
		srv := httptest.NewServer(st.gateway(time.Minute))
		defer srv.Close()
		resp, m := testutil.DoJSON(t, "POST", srv.URL+"/runs", `{"workflowId":"conformance-noop"}`,
			"Authorization", testutil.Bearer(key), "Idempotency-Key", "wake-test-key-0123456789")
		if resp.StatusCode != 201 {
			t.Fatalf("POST /runs: %d %v", resp.StatusCode, m)
		}
		for name, want := range map[string]bool{"runs": true, "idempotency": true, "effects": false} {
			got := false
			select {
			case <-wakes[name]:
				got = true
			default:
			}
			if got != want {
				t.Errorf("after a new run: the %s poller woken %v, want %v", name, got, want)
			}
		}
	})
}
