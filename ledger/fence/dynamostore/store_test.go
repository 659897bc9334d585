package dynamostore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence/fencetest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestConformance(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		client := e.Client()
		var table string
		fencetest.Run(t, fencetest.Harness{
			NewStore: func(t *testing.T) fence.Store {
				table = e.CreateTable(t, "FenceTable")
				return newStore(t, client, table)
			},
			Delete: func(t *testing.T, _ fence.Store, id string) {
				if _, err := client.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(table),
					Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "fence#" + id}}}); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
}

// Round trips are a contract: Token and Pass are one UpdateItem each; a
// Token refused because a token passed is two (plus a GetItem where the
// engine returns no old item with the failed condition).
func TestRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cnt := dynamotest.NewCounter()
		st := newStore(t, e.Client(cnt.Middleware()), e.CreateTable(t, "FenceTable"))
		o, err := fence.New(fence.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		id := fencetest.EffectID()
		tok, err := o.Token(ctx(t), id)
		if err != nil || cnt.Total() != 1 {
			t.Fatalf("Token: %v, %d round trips", err, cnt.Total())
		}
		cnt.Reset()
		if err := o.Pass(ctx(t), id, tok); err != nil || cnt.Total() != 1 {
			t.Fatalf("Pass: %v, %d round trips (%v)", err, cnt.Total(), cnt.Ops())
		}
		// Refused because a token passed: the refused UpdateItem and the
		// one that keeps the pass as long as the new token would have been.
		cnt.Reset()
		if _, err := o.Token(ctx(t), id); !errors.Is(err, fence.ErrIssued) || cnt.Total() > 3 || cnt.Ops()["UpdateItem"] != 2 {
			t.Fatalf("refused Token: %v, %d round trips (%v)", err, cnt.Total(), cnt.Ops())
		}
		// Keeping the passed token's item longer (the outcome of an
		// escaped attempt written past what the fence keeps): one
		// conditional UpdateItem.
		cnt.Reset()
		if err := o.Keep(ctx(t), id, tok, time.Now().Add(30*24*time.Hour)); err != nil || cnt.Total() != 1 || cnt.Ops()["UpdateItem"] != 1 {
			t.Fatalf("Keep: %v, %d round trips (%v)", err, cnt.Total(), cnt.Ops())
		}
	})
}

// A point-of-no-return write whose response is lost is retried by the SDK;
// the retry's failed condition is recognised as this token's own pass.
// A lost Acquire response costs one token number, never monotonicity.
func TestLostResponses(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		st := newStore(t, e.Client(f.Middleware(), dynamotest.FastRetries), e.CreateTable(t, "FenceTable"))
		o, _ := fence.New(fence.Config{Store: st})
		id := fencetest.EffectID()
		f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
		tok, err := o.Token(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		it, _ := st.Get(ctx(t), id)
		if it == nil || it.Token != tok {
			t.Fatalf("stored %+v, returned %d", it, tok)
		}
		f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
		if err := o.Pass(ctx(t), id, tok); err != nil {
			t.Fatalf("retried pass: %v", err)
		}
		if f.Fired() != 2 {
			t.Fatalf("faults fired %d, want 2", f.Fired())
		}
		if _, err := o.Token(ctx(t), id); err == nil {
			t.Fatal("token issued after the pass")
		}
	})
}

// An injected DynamoDB error on the point-of-no-return write is returned,
// and nothing passed: the next token still can.
func TestInjectedErrors(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		st := newStore(t, e.Client(f.Middleware(), dynamotest.FastRetries, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }), e.CreateTable(t, "FenceTable"))
		o, _ := fence.New(fence.Config{Store: st})
		id := fencetest.EffectID()
		tok, err := o.Token(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		f.FailNext("UpdateItem", 1, dynamotest.InternalServerError())
		if err := o.Pass(ctx(t), id, tok); err == nil {
			t.Fatal("injected error swallowed")
		}
		if it, _ := st.Get(ctx(t), id); it == nil || it.Passed != nil {
			t.Fatalf("after failed pass: %+v", it)
		}
		tok2, err := o.Token(ctx(t), id)
		if err != nil || o.Pass(ctx(t), id, tok2) != nil {
			t.Fatalf("recovery: %v", err)
		}
	})
}

// The sweeper enforces retention where there is no TTL (MRSC tables): it
// deletes expired items only, on the effects table's composite key too.
func TestSweeper(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		client := e.Client()
		now := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		for _, tc := range []struct {
			table string
			keys  []string
		}{{"FenceTable", nil}, {"EffectsTable", []string{"pk", "sk"}}} {
			table := e.CreateTable(t, tc.table)
			for i := range 30 {
				exp := now.Add(-time.Hour)
				if i%3 == 0 {
					exp = now.Add(time.Hour)
				}
				item := map[string]types.AttributeValue{
					"pk":        &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(i)},
					"expiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)},
				}
				if tc.keys != nil {
					item["sk"] = &types.AttributeValueMemberS{Value: "record"}
				}
				if i == 29 {
					delete(item, "expiresAt") // never swept
				}
				if _, err := client.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
					t.Fatal(err)
				}
			}
			w := &dynamostore.Sweeper{API: client, Table: table, KeyAttrs: tc.keys, PageSize: 7}
			n, err := w.Sweep(ctx(t), now)
			if err != nil || n != 19 {
				t.Fatalf("%s: swept %d (%v), want 19", tc.table, n, err)
			}
			out, err := client.Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(table)})
			if err != nil || len(out.Items) != 11 {
				t.Fatalf("%s: %d items left (%v), want 11", tc.table, len(out.Items), err)
			}
			if n, _ := w.Sweep(ctx(t), now); n != 0 {
				t.Fatalf("second sweep deleted %d", n)
			}
		}
	})
}
