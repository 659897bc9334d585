package dynamostore_test

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/itemsize"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// The compact layout: top level, only what DynamoDB reads (keys, index key,
// TTL, the attributes the write conditions test); the rest is one binary
// attribute. A zero fence is left out (the fence condition reads absence
// as 0).
func TestCompactLayout(t *testing.T) {
	rec := fullRecord()
	av, err := dynamostore.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range av {
		names = append(names, k)
	}
	sort.Strings(names)
	want := []string{dynamostore.PackedAttribute, "attempt", "expiresAt", "expiresAtMs", "fence", "leaseUntil", "owner", "pk", "runKey", "sk", "state"}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Fatalf("attributes %v, want %v", names, want)
	}
	if _, ok := av[dynamostore.PackedAttribute].(*types.AttributeValueMemberB); !ok {
		t.Fatalf("packed attribute is %T", av[dynamostore.PackedAttribute])
	}
	rec.Fence, rec.RunID = 0, ""
	av, _ = dynamostore.EncodeRecord(rec)
	if _, ok := av["fence"]; ok {
		t.Error("zero fence written")
	}
	if _, ok := av["runKey"]; ok {
		t.Error("runKey written outside a run (the index is sparse)")
	}
	if got, err := dynamostore.DecodeRecord(av); err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("round trip without fence and run: %+v %v", got, err)
	}
	// A record with no attempts and no outcome (a slot) round-trips too.
	slot := &ledger.Record{Key: "host#abc", Kind: identity.KindSlot, State: ledger.StateClaimed, Owner: "o", Attempt: 0,
		LeaseUntil: time.UnixMilli(5).UTC(), CreatedAt: time.UnixMilli(1).UTC(), UpdatedAt: time.UnixMilli(2).UTC(), ExpiresAt: time.UnixMilli(9).UTC()}
	av, _ = dynamostore.EncodeRecord(slot)
	if got, err := dynamostore.DecodeRecord(av); err != nil || !reflect.DeepEqual(got, slot) {
		t.Fatalf("slot round trip: %+v %v", got, err)
	}
}

// A damaged packed attribute (every truncation, a trailing byte, an unknown
// version, a wrongly typed condition attribute) is an error, never a panic
// or a wrong record.
func TestCompactLayoutRejectsDamage(t *testing.T) {
	av, _ := dynamostore.EncodeRecord(fullRecord())
	b := av[dynamostore.PackedAttribute].(*types.AttributeValueMemberB).Value
	damaged := func(v []byte) map[string]types.AttributeValue {
		m := make(map[string]types.AttributeValue, len(av))
		for k, x := range av {
			m[k] = x
		}
		m[dynamostore.PackedAttribute] = &types.AttributeValueMemberB{Value: v}
		return m
	}
	for i := range b {
		if r, err := dynamostore.DecodeRecord(damaged(b[:i])); err == nil {
			t.Fatalf("truncated to %d bytes: decoded %+v", i, r)
		}
	}
	if _, err := dynamostore.DecodeRecord(damaged(append(slices.Clone(b), 0))); err == nil {
		t.Fatal("trailing byte accepted")
	}
	v := slices.Clone(b)
	v[0] = 99
	if _, err := dynamostore.DecodeRecord(damaged(v)); err == nil {
		t.Fatal("unknown version accepted")
	}
	m := damaged(b)
	m["attempt"] = &types.AttributeValueMemberS{Value: "2"}
	if _, err := dynamostore.DecodeRecord(m); err == nil {
		t.Fatal("string attempt accepted")
	}
	delete(m, "attempt")
	if _, err := dynamostore.DecodeRecord(m); err == nil {
		t.Fatal("missing attempt accepted")
	}
}

// Records written in the previous layout (one attribute per field,
// attempts a list of maps) decode to the same record, and, stored in the
// table, are handled: a completed one answers a duplicate with its
// outcome; a claimed one whose lease expired is reclaimed under the same
// fencing conditions, and the write that reclaims it stores the compact
// layout.
func TestPreviousLayoutIsRead(t *testing.T) {
	rec := fullRecord()
	old, err := dynamostore.EncodePreviousLayout(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := old[dynamostore.PackedAttribute]; ok {
		t.Fatal("previous layout has the packed attribute")
	}
	if got, err := dynamostore.DecodeRecord(old); err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("previous layout\n got %+v %v\nwant %+v", got, err, rec)
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		client := e.Client()
		table := e.CreateTable(t, "EffectsTable")
		st := newStore(t, client, table)
		clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
		l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		fired := 0
		fn := func(context.Context, ledger.Call) ([]byte, error) { fired++; return []byte("new"), nil }
		// Write each effect once through the ledger (so its record is what
		// this ledger would store), then put it back in the previous layout.
		stage := func(eff ledger.Effect, edit func(*ledger.Record)) string {
			t.Helper()
			if _, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { return []byte("old"), nil }); err != nil {
				t.Fatal(err)
			}
			key := "effect#" + eff.Identity.EffectID
			r, err := st.Get(ctx, key)
			if err != nil || r == nil {
				t.Fatal(r, err)
			}
			edit(r)
			item, err := dynamostore.EncodePreviousLayout(r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				t.Fatal(err)
			}
			if got, err := st.Get(ctx, key); err != nil || !reflect.DeepEqual(got, r) {
				t.Fatalf("previous-layout record read back\n got %+v %v\nwant %+v", got, err, r)
			}
			return key
		}
		done := business(t, "legacy-done")
		stage(done, func(*ledger.Record) {})
		if r, err := l.Do(ctx, done, fn); err != nil || !r.Replayed || string(r.Value) != "old" || fired != 0 {
			t.Fatalf("duplicate of a previous-layout record: %+v %v fired=%d", r, err, fired)
		}

		stuck := business(t, "legacy-stuck")
		key := stage(stuck, func(r *ledger.Record) { // claimed by a dead owner, never fired
			r.State, r.Owner, r.Outcome = ledger.StateClaimed, "dead-owner", nil
			r.LeaseUntil = clock.Now().Add(time.Second)
			r.Attempts[0].State, r.Attempts[0].Fired, r.Attempts[0].FiredAt = ledger.AttemptClaimed, false, time.Time{}
		})
		// Live lease: the previous layout's owner still holds it.
		if _, err := l.Do(ctx, stuck, fn); !errors.Is(err, ledger.ErrInFlight) || fired != 0 {
			t.Fatalf("live previous-layout claim: %v fired=%d", err, fired)
		}
		clock.Advance(2 * time.Second)
		r, err := l.Do(ctx, stuck, fn)
		if err != nil || r.Replayed || string(r.Value) != "new" || r.Attempt != 2 || fired != 1 {
			t.Fatalf("reclaim of a previous-layout record: %+v %v fired=%d", r, err, fired)
		}
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}, "sk": &types.AttributeValueMemberS{Value: "record"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.Item[dynamostore.PackedAttribute]; !ok {
			t.Fatalf("reclaimed record not rewritten in the compact layout: %v", out.Item)
		}
		if _, ok := out.Item["attempts"]; ok {
			t.Fatal("compact record kept the previous layout's attempts attribute")
		}
	})
}

// Every field survives the packed encoding whatever it holds: a value equal
// to one the encoding names by reference (a well-known constant, the effect
// id within the key, the previous attempt's run), another, or empty.
func TestCompactLayoutRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := fullRecord()
	pick := func(pool ...string) string { return pool[rng.IntN(len(pool))] }
	tm := func() time.Time {
		switch rng.IntN(4) {
		case 0:
			return time.Time{}
		case 1:
			return time.UnixMilli(0).UTC()
		default:
			return base.CreatedAt.Add(time.Duration(rng.Int64N(int64(48*time.Hour))) - 24*time.Hour).Truncate(time.Millisecond)
		}
	}
	for i := 0; i < 2000; i++ {
		r := base.Clone()
		r.Kind = identity.Kind(pick("effect", "slot", "other", ""))
		r.EffectID = pick(base.EffectID, "acme/other", "", "no-slash")
		r.Tenant = pick("acme", "other", "")
		r.Keying = identity.Keying(pick(string(identity.KeyingActivityRecipe), string(identity.KeyingBusinessIdentity), "x"))
		r.IdentityRecipe = pick(identity.ActivityRecipe, identity.BusinessRecipe, "", "v9")
		r.SemanticRecipe = pick("", "openwop-semantic-request-v2", "s")
		r.RunID = pick("", base.RunID, "acme/run-0000000000000009")
		r.MaxAttempts = rng.IntN(5)
		r.CreatedAt, r.UpdatedAt, r.Deadline, r.NotBefore = tm(), tm(), tm(), tm()
		switch rng.IntN(3) {
		case 0:
			r.Outcome = nil
		case 1:
			r.Outcome = &ledger.Outcome{OK: true, Value: []byte(pick("v", "{}")), Dropped: rng.IntN(2) == 0}
		default:
			r.Outcome = &ledger.Outcome{Error: pick("", "declined"), Streamed: true, BodyDigest: "e3b0", BodySize: rng.Int64N(1 << 40)}
		}
		r.Attempts = nil
		for n := range rng.IntN(4) {
			r.Attempts = append(r.Attempts, ledger.Attempt{N: n + 1,
				State: ledger.AttemptState(pick("claimed", "completed", "released", "escaped", "odd")),
				At:    tm(), Fired: rng.IntN(2) == 0, FiredAt: tm(),
				RunID: pick("", r.RunID, base.RunID, "acme/run-0000000000000007"), NodeID: pick("", "charge", "n"),
				InvocationID: pick("", r.EffectID, "AAAAAAAAAAAAAAAAAAAAAA", "other"),
				Operator:     pick("", "ops@acme"), Note: pick("", "refunded by hand")})
		}
		av, err := dynamostore.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dynamostore.DecodeRecord(av)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip %d\n got %+v %v\nwant %+v", i, got, err, r)
		}
	}
}

// A recorded value that would take the record past one write unit is kept
// in an item of its own beside it: the record stays within 1 KB and names
// the value item; the value item carries the record's retention, is not in
// the byRun index (no runKey) and is no record (DecodeRecord, Scan and the
// stream auditor skip it); Get, ListByRun and Scan return the value.
func TestValueBesideTheRecord(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		client := e.Client()
		table := e.CreateTable(t, "EffectsTable")
		st := newStore(t, client, table)
		l, err := ledger.New(ledger.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		value := make([]byte, 3000)
		_, _ = rand.NewChaCha8([32]byte{'v'}).Read(value)
		eff := business(t, "beside-1")
		r, err := l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) { return value, nil })
		if err != nil {
			t.Fatal(err)
		}
		key := "effect#" + r.EffectID
		out, err := client.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("pk = :k"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: key}}})
		if err != nil {
			t.Fatal(err)
		}
		var record, beside map[string]types.AttributeValue
		for _, it := range out.Items {
			if it["sk"].(*types.AttributeValueMemberS).Value == "record" {
				record = it
			} else if it["v"] != nil {
				beside = it
			}
		}
		if record == nil || beside == nil {
			t.Fatalf("items %v", out.Items)
		}
		if n := itemsize.Of(record); n > itemsize.WriteUnit {
			t.Errorf("record item %d bytes, want at most %d", n, itemsize.WriteUnit)
		}
		if _, ok := beside["runKey"]; ok {
			t.Error("value item is in the byRun index")
		}
		if !reflect.DeepEqual(beside["expiresAtMs"], record["expiresAtMs"]) {
			t.Errorf("value item expiresAtMs %v, record's %v", beside["expiresAtMs"], record["expiresAtMs"])
		}
		// The value outlives its record by a day in the TTL
		// (TestValueItemOutlivesItsRecord).
		vt, _ := strconv.ParseInt(beside["expiresAt"].(*types.AttributeValueMemberN).Value, 10, 64)
		rt, _ := strconv.ParseInt(record["expiresAt"].(*types.AttributeValueMemberN).Value, 10, 64)
		if vt-rt != 86400 {
			t.Errorf("value item expiresAt %d, record's %d; want a day later", vt, rt)
		}
		if _, err := dynamostore.DecodeRecord(beside); !errors.Is(err, dynamostore.ErrNotRecord) {
			t.Errorf("DecodeRecord(value item) = %v, want ErrNotRecord", err)
		}
		if got, err := dynamostore.DecodeRecord(record); err != nil || got.Outcome == nil || got.Outcome.Value != nil {
			t.Errorf("DecodeRecord(record): %v; the image holds no value", err)
		}
		got, err := st.Get(context.Background(), key)
		if err != nil || got == nil || !slices.Equal(got.Outcome.Value, value) {
			t.Fatalf("Get: %v", err)
		}
		list, err := st.ListByRun(context.Background(), eff.RunID)
		if err != nil || len(list) != 1 || !slices.Equal(list[0].Outcome.Value, value) {
			t.Fatalf("ListByRun: %d records, %v", len(list), err)
		}
		n := 0
		if err := st.Scan(context.Background(), func(r *ledger.Record) bool {
			n++
			if !slices.Equal(r.Outcome.Value, value) {
				t.Error("Scan: value differs")
			}
			return true
		}); err != nil || n != 1 {
			t.Fatalf("Scan: %d records, %v", n, err)
		}
		// A value item that went missing is an error, never a success
		// replayed without its value.
		if _, err := client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": beside["pk"], "sk": beside["sk"]}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Get(context.Background(), key); err == nil {
			t.Fatal("Get with the value item gone: no error")
		}
	})
}
