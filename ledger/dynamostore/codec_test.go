package dynamostore_test

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/semantic"
)

// fullRecord sets every field of a ledger.Record (times at the millisecond
// precision the store keeps).
func fullRecord() *ledger.Record {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 123e6, time.UTC)
	return &ledger.Record{
		Key: "effect#acme/AAAAAAAAAAAAAAAAAAAAAA", Kind: identity.KindEffect, EffectID: "acme/AAAAAAAAAAAAAAAAAAAAAA", Tenant: "acme",
		Keying: identity.KeyingActivityRecipe, IdentityRecipe: identity.ActivityRecipe,
		SemanticRecipe: semantic.RecipeV2, RequestDigest: "d1",
		ProviderKey: "idemkit-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", RunID: "acme/run-0000000000000001",
		State: ledger.StateCompleted, Owner: "tok", Attempt: 2, LeaseUntil: t0.Add(time.Minute), Fence: 7,
		Outcome: &ledger.Outcome{OK: true, Streamed: true, BodyDigest: "e3b0", BodySize: 42},
		Attempts: []ledger.Attempt{
			{N: 1, State: ledger.AttemptEscaped, At: t0, Fired: true, RunID: "acme/run-0000000000000001", NodeID: "n", InvocationID: "inv"},
			{N: 2, State: ledger.AttemptCompleted, At: t0.Add(time.Second), Fired: true, RunID: "acme/run-0000000000000002", NodeID: "m"},
		},
		CreatedAt: t0, UpdatedAt: t0.Add(time.Second), ExpiresAt: t0.Add(ledger.MinRetention),
	}
}

// DecodeRecord is the inverse of the store's encoding, for every field.
func TestDecodeRecordRoundTrip(t *testing.T) {
	rec := fullRecord()
	av, err := dynamostore.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dynamostore.DecodeRecord(av)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, rec)
	}
	// A value outcome and a failure outcome too.
	rec.Outcome = &ledger.Outcome{OK: true, Value: []byte("re_42")}
	av, _ = dynamostore.EncodeRecord(rec)
	if got, _ := dynamostore.DecodeRecord(av); !reflect.DeepEqual(got, rec) {
		t.Fatalf("value outcome: %+v", got.Outcome)
	}
	rec.Outcome = &ledger.Outcome{Error: "declined"}
	av, _ = dynamostore.EncodeRecord(rec)
	if got, _ := dynamostore.DecodeRecord(av); !reflect.DeepEqual(got, rec) {
		t.Fatalf("failure outcome: %+v", got.Outcome)
	}
	// Missing images (INSERT's old image, REMOVE's new image).
	if r, err := dynamostore.DecodeRecord(nil); r != nil || err != nil {
		t.Fatalf("nil image: %v %v", r, err)
	}
	if _, err := dynamostore.EncodeRecord(nil); err == nil {
		t.Fatal("nil record encoded")
	}
}

// The item uses the attribute names template.yaml's EffectsTable declares:
// its keys, the byRun index key and the TTL attribute (Unix seconds,
// rounded up, never before the retention deadline).
func TestItemMatchesTemplate(t *testing.T) {
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := defs["EffectsTable"]
	if !ok {
		t.Fatal("no EffectsTable in template.yaml")
	}
	rec := fullRecord()
	av, _ := dynamostore.EncodeRecord(rec)
	for _, k := range d.KeySchema {
		if _, ok := av[aws.ToString(k.AttributeName)].(*types.AttributeValueMemberS); !ok {
			t.Errorf("item lacks key attribute %s", aws.ToString(k.AttributeName))
		}
	}
	for _, g := range d.GlobalSecondaryIndexes {
		for _, k := range g.KeySchema {
			if _, ok := av[aws.ToString(k.AttributeName)].(*types.AttributeValueMemberS); !ok {
				t.Errorf("item lacks %s key attribute %s", aws.ToString(g.IndexName), aws.ToString(k.AttributeName))
			}
		}
	}
	ttl, ok := av[d.TTLAttribute].(*types.AttributeValueMemberN)
	if d.TTLAttribute == "" || !ok {
		t.Fatalf("TTL attribute %q missing from the item", d.TTLAttribute)
	}
	secs, _ := strconv.ParseInt(ttl.Value, 10, 64)
	if want := (rec.ExpiresAt.UnixMilli() + 999) / 1000; secs != want || time.Unix(secs, 0).Before(rec.ExpiresAt) {
		t.Fatalf("TTL %d, want %d (not before the retention deadline)", secs, want)
	}
}

// Run-reference items share the records' partition and the stream: the
// decoder tells them apart instead of returning a bogus record.
func TestDecodeRecordRejectsOtherItems(t *testing.T) {
	ref := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "effect#acme/x"},
		"sk": &types.AttributeValueMemberS{Value: "run#acme/run-0000000000000001"},
	}
	if _, err := dynamostore.DecodeRecord(ref); !errors.Is(err, dynamostore.ErrNotRecord) {
		t.Fatalf("run reference: %v", err)
	}
	ref["sk"] = &types.AttributeValueMemberS{Value: "something-else"}
	if _, err := dynamostore.DecodeRecord(ref); !errors.Is(err, dynamostore.ErrNotRecord) {
		t.Fatalf("foreign item: %v", err)
	}
}

// The effects table's shape in template.yaml: a stream with both images (the
// conflict auditor needs the old image), TTL on expiresAt, keys pk/sk, the
// byRun index, and a global table.
func TestEffectsTableTemplateShape(t *testing.T) {
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	d := defs["EffectsTable"]
	if d.Type != "AWS::DynamoDB::GlobalTable" {
		t.Errorf("type %s", d.Type)
	}
	if d.StreamViewType != types.StreamViewTypeNewAndOldImages {
		t.Errorf("stream %q, want NEW_AND_OLD_IMAGES", d.StreamViewType)
	}
	if d.TTLAttribute != "expiresAt" {
		t.Errorf("TTL attribute %q, want expiresAt", d.TTLAttribute)
	}
	keys := func(ks []types.KeySchemaElement) []string {
		var s []string
		for _, k := range ks {
			s = append(s, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
		}
		return s
	}
	if got := keys(d.KeySchema); !reflect.DeepEqual(got, []string{"pk:HASH", "sk:RANGE"}) {
		t.Errorf("keys %v", got)
	}
	found := false
	for _, g := range d.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == dynamostore.IndexByRun {
			found = reflect.DeepEqual(keys(g.KeySchema), []string{"runKey:HASH", "sk:RANGE"})
		}
	}
	if !found {
		t.Errorf("no %s(runKey, sk) index: %+v", dynamostore.IndexByRun, d.GlobalSecondaryIndexes)
	}
}

// Against each emulator: the items the store writes decode with
// DecodeRecord to exactly what Store.Get returns; the hot path (first
// effect, duplicate, reclaim, witness) uses only single-item operations,
// never a transaction (MRSC global tables have none); and where the
// emulator implements TTL, it is enabled on expiresAt.
func TestStoredItemsAndOperations(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		counter := dynamotest.NewCounter()
		client := e.Client(counter.Middleware())
		table := e.CreateTable(t, "EffectsTable")
		st := newStore(t, client, table)
		clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
		l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		eff := business(t, "codec-1")
		okFn := func(context.Context, ledger.Call) ([]byte, error) { return []byte("v"), nil }
		if _, err := l.Do(ctx, eff, okFn); err != nil {
			t.Fatal(err)
		}
		if r, err := l.Do(ctx, eff, okFn); err != nil || !r.Replayed {
			t.Fatal(r, err)
		}
		other := business(t, "codec-2")
		_, _ = l.Do(ctx, other, func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("timeout"))
		})
		other.RunID = "acme/run-fedcba9876543210"
		if _, err := l.Do(ctx, other, okFn); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Witness(ctx, other.RunID); err != nil {
			t.Fatal(err)
		}
		for op := range counter.Ops() {
			switch op {
			case "PutItem", "GetItem", "Query":
			default:
				t.Errorf("ledger hot path used %s", op)
			}
		}
		for _, x := range []ledger.Effect{eff, other} {
			key := "effect#" + x.Identity.EffectID
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}, "sk": &types.AttributeValueMemberS{Value: "record"}}})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := dynamostore.DecodeRecord(out.Item)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := st.Get(ctx, key)
			if want == nil || !reflect.DeepEqual(dec, want) {
				t.Fatalf("DecodeRecord\n got %+v\nwant %+v", dec, want)
			}
		}
		if e.Caps.TTL && !e.DeletesExpired { // CreateTable leaves TTL off where expired items are deleted
			out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
			if err != nil {
				t.Fatal(err)
			}
			d := out.TimeToLiveDescription
			if d == nil || aws.ToString(d.AttributeName) != "expiresAt" || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
				t.Fatalf("TTL %+v", d)
			}
		}
	})
}
