package dynamostore_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/idemkit/idemkit/idem/keyspace"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

const (
	digest = "test-recipe-v1:sha256:0000000000000000000000000000000000000000000000000000000000000000"
	lease  = 30 * time.Second
	keep   = 24 * time.Hour
)

func rnd(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newID() string { return keyspace.ID("tenant", "POST /runs", "key-"+rnd(16)) }

func pending(id, owner string, now time.Time) idem.Record {
	return idem.Record{ID: id, Digest: digest, State: idem.StatePending, Owner: owner,
		LeaseExpires: now.Add(lease), RequestID: "req-" + owner, Expires: now.Add(keep)}
}

func done(body string, now time.Time) idem.Outcome {
	return idem.Outcome{State: idem.StateCompleted, Expires: now.Add(keep),
		Response: &idem.Response{Status: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body)}}
}

// env is one emulator with a fresh table, a counter and a fault injector on
// the store's client (with fast SDK retries).
type env struct {
	e     *dynamotest.Emulator
	c     *dynamodb.Client
	table string
	cnt   *dynamotest.Counter
	f     *dynamotest.Faults
	s     *dynamostore.Store
	now   time.Time
	// claims holds the record each successful v.claim returned, by id and
	// owner: what Complete is handed.
	claims *sync.Map
}

// rec is the record the claim of id by owner returned; for an owner that
// never claimed id, the record such a claim at v.now would have returned
// (a forged or foreign claim).
func (v *env) rec(id, owner string) idem.Record {
	if r, ok := v.claims.Load(id + "\x00" + owner); ok {
		return r.(idem.Record)
	}
	r := pending(id, owner, v.now)
	r.Attempt, r.Renewed = 1, v.now
	return r
}

func setup(t *testing.T, e *dynamotest.Emulator) *env {
	v := &env{e: e, table: e.CreateTable(t, "IdempotencyTable"), cnt: dynamotest.NewCounter(), f: dynamotest.NewFaults(), claims: new(sync.Map)}
	v.c = e.Client(dynamotest.FastRetries, v.f.Middleware(), v.cnt.Middleware())
	v.s = newStore(t, v.c, v.table)
	v.now = time.Now().Truncate(time.Millisecond)
	return v
}

func (v *env) claim(t *testing.T, rec idem.Record, now time.Time, want idem.Decision) idem.Record {
	t.Helper()
	res, err := v.s.Claim(ctxT(t), rec, now)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if res.Decision != want {
		t.Fatalf("Claim = %v (owner %s state %s), want %v", res.Decision, res.Record.Owner, res.Record.State, want)
	}
	if want == idem.Claimed || want == idem.Reclaimed {
		v.claims.Store(rec.ID+"\x00"+rec.Owner, res.Record)
	}
	return res.Record
}

func (v *env) raw(t *testing.T, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := v.e.Client().GetItem(ctxT(t), &dynamodb.GetItemInput{TableName: aws.String(v.table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func (v *env) chunkItems(t *testing.T) int {
	t.Helper()
	n := 0
	// Keys only: the chunk items hold up to a 6 MB response each, which a
	// full scan would read back on every count.
	p := dynamodb.NewScanPaginator(v.e.Client(), &dynamodb.ScanInput{TableName: aws.String(v.table), ProjectionExpression: aws.String("pk")})
	for p.HasMorePages() {
		out, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			if strings.HasPrefix(it["pk"].(*types.AttributeValueMemberS).Value, "chunk:") {
				n++
			}
		}
	}
	return n
}

// TestRoundTrips holds the store to its round-trip contract, counted as HTTP
// requests: first execution = 2 (claim, complete); replay and in-flight = 1
// where the server returns the old item on a failed condition (moto), 2
// where it does not (dynalite: consistent GetItem fallback).
func TestRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		lost := 1
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			lost = 2
		}
		id := newID()
		v.cnt.Reset()
		v.claim(t, pending(id, "o1", v.now), v.now, idem.Claimed)
		if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), done(`{"ok":true}`, v.now), v.now); err != nil {
			t.Fatal(err)
		}
		if got := v.cnt.Total(); got != 2 {
			t.Errorf("first execution: %d round trips %v, want 2", got, v.cnt.Ops())
		}

		v.cnt.Reset()
		rec := v.claim(t, pending(id, "o2", v.now), v.now, idem.Exists)
		if string(rec.Response.Body) != `{"ok":true}` {
			t.Fatalf("replayed %q", rec.Response.Body)
		}
		if got := v.cnt.Total(); got != lost {
			t.Errorf("replay: %d round trips %v, want %d", got, v.cnt.Ops(), lost)
		}

		id2 := newID()
		v.claim(t, pending(id2, "o1", v.now), v.now, idem.Claimed)
		v.cnt.Reset()
		v.claim(t, pending(id2, "o2", v.now), v.now, idem.Exists)
		if got := v.cnt.Total(); got != lost {
			t.Errorf("in-flight: %d round trips %v, want %d", got, v.cnt.Ops(), lost)
		}

		// A stale owner's write costs one round trip and writes nothing.
		v.cnt.Reset()
		if err := v.s.Complete(ctxT(t), v.rec(id2, "stale"), done("x", v.now), v.now); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("stale Complete: %v", err)
		}
		if got := v.cnt.Total(); got != 1 {
			t.Errorf("fenced complete: %d round trips, want 1", got)
		}

		// A chunked response: replay adds one BatchGetItem.
		id3 := newID()
		big := make([]byte, 2<<20)
		_, _ = rand.Read(big)
		v.claim(t, pending(id3, "o1", v.now), v.now, idem.Claimed)
		out := done("", v.now)
		out.Response.Body = big
		if err := v.s.Complete(ctxT(t), v.rec(id3, "o1"), out, v.now); err != nil {
			t.Fatal(err)
		}
		v.cnt.Reset()
		rec = v.claim(t, pending(id3, "o2", v.now), v.now, idem.Exists)
		if !bytes.Equal(rec.Response.Body, big) {
			t.Fatal("chunked replay differs")
		}
		// Real DynamoDB and moto return up to 16 MB per BatchGetItem: one
		// call. dynalite returns at most 1 MB and leaves the rest unprocessed.
		if got, ops := v.cnt.Total(), v.cnt.Ops(); ops["BatchGetItem"] < 1 ||
			(e.Kind == dynamotest.Moto && got != lost+1) {
			t.Errorf("chunked replay: %d round trips %v, want %d", got, ops, lost+1)
		}
	})
}

// TestStoredItem checks the item shape: TTL attribute expiresAt in epoch
// seconds (rounded up) whenever retention is finite, none otherwise; the raw
// key is not stored; chunk items carry the record's TTL.
func TestStoredItem(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		now := time.UnixMilli(1_800_000_000_123)
		id := newID()
		v.claim(t, pending(id, "o1", now), now, idem.Claimed)
		it := v.raw(t, id)
		want := now.Add(keep).Unix() + 1 // 123 ms rounds up
		if n, ok := it["expiresAt"].(*types.AttributeValueMemberN); !ok || n.Value != itoa(want) {
			t.Fatalf("expiresAt = %v, want %d", it["expiresAt"], want)
		}
		for k, a := range it {
			if s, ok := a.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, "key-") {
				t.Fatalf("attribute %s holds the raw key", k)
			}
		}

		// Completion with no retention removes the TTL.
		out := done("forever", now)
		out.Expires = time.Time{}
		if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now); err != nil {
			t.Fatal(err)
		}
		if it := v.raw(t, id); it["expiresAt"] != nil || it["expiresAtMs"] != nil {
			t.Fatalf("no-expiry record has TTL attributes: %v", it)
		}

		// Chunk items carry the record's TTL.
		id2 := newID()
		v.claim(t, pending(id2, "o1", now), now, idem.Claimed)
		big := make([]byte, 1<<20)
		_, _ = rand.Read(big)
		out = done("", now)
		out.Response.Body = big
		if err := v.s.Complete(ctxT(t), v.rec(id2, "o1"), out, now); err != nil {
			t.Fatal(err)
		}
		nonce := v.raw(t, id2)["respNonce"].(*types.AttributeValueMemberS).Value
		ck := "chunk:v1:" + strings.TrimPrefix(id2, keyspace.CallerPrefix) + ":" + nonce + ":0"
		if n, ok := v.raw(t, ck)["expiresAt"].(*types.AttributeValueMemberN); !ok || n.Value != itoa(want) {
			t.Fatalf("chunk expiresAt = %v", n)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
