package dynamostore_test

import (
	"bytes"
	"compress/flate"
	"crypto/rand"
	"crypto/sha256"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/itemsize"
)

// TestCompletedItemIsLean: a completed record with an inline response holds
// only attributes a decision reads (no encoding, length, checksum or status
// copies, no lease and no liveness: they mean something only while
// pending), and a retryable completion adds none.
func TestCompletedItemIsLean(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		id := newID()
		v.claim(t, pending(id, "o1", v.now), v.now, idem.Claimed)
		if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), done(`{"ok":true}`, v.now), v.now); err != nil {
			t.Fatal(err)
		}
		want := "attempt,digest,expiresAt,expiresAtMs,owner,pk,requestId,resp,state"
		if got := names(v.raw(t, id)); got != want {
			t.Fatalf("completed item attributes = %s, want %s", got, want)
		}
		id2 := newID()
		v.claim(t, pending(id2, "o1", v.now), v.now, idem.Claimed)
		if err := v.s.Complete(ctxT(t), v.rec(id2, "o1"), idem.Outcome{State: idem.StateRetryableFailure, Expires: v.now.Add(keep)}, v.now); err != nil {
			t.Fatal(err)
		}
		want = "attempt,digest,expiresAt,expiresAtMs,owner,pk,requestId,state"
		if got := names(v.raw(t, id2)); got != want {
			t.Fatalf("retryable item attributes = %s, want %s", got, want)
		}
		got, ok, err := v.s.Get(ctxT(t), id, v.now)
		if err != nil || !ok || !got.LeaseExpires.IsZero() || !got.Renewed.IsZero() {
			t.Fatalf("Get = %+v, %t, %v; want a record without lease", got, ok, err)
		}
	})
}

// TestCompletionKeepsTheClaimedItem: the completion rewrites the whole item
// from the record Claim returned. Compared attribute by attribute with the
// pending item it replaces (after a fresh claim, after a lease reclaim and
// a renewal, with a chunked response, and inside a transaction where the
// engine has them), every attribute the claim stored is kept byte for byte
// (pk, digest, owner, attempt, requestId: what replays, audits and the
// stream auditor read), the completion sets state, retention (expiresAtMs
// and the TTL attribute expiresAt the sweeper and DynamoDB's TTL read),
// the raw body hash of the attempt that ran (rawBodySha256, which no
// claim writes, whatever it carries) and the response, and removes only
// leaseAt and renewedAt.
func TestCompletionKeepsTheClaimedItem(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		biz := ""
		if e.Caps.Transactions {
			biz = e.CreateTable(t, "RunsTable")
		}
		big := make([]byte, 1<<20)
		_, _ = rand.Read(big)
		for _, tc := range []struct {
			name     string
			reclaim  bool
			body     []byte
			tx       bool
			state    idem.State
			response string // the response attributes the completion sets
		}{
			{name: "Fresh", body: []byte(`{"ok":true}`), state: idem.StateCompleted, response: "resp"},
			{name: "ReclaimedAndRenewed", reclaim: true, body: []byte(`{"ok":2}`), state: idem.StateTerminalFailure, response: "resp"},
			{name: "Retryable", reclaim: true, state: idem.StateRetryableFailure},
			{name: "Chunked", body: big, state: idem.StateCompleted, response: "respChunks,respEnc,respLen,respNonce,respSha,status"},
			{name: "Transaction", tx: true, body: []byte(`{"run":1}`), state: idem.StateCompleted, response: "resp"},
		} {
			if tc.tx && biz == "" {
				continue // no transactions here: TestTransactionalCompletion proves the refusal
			}
			t.Run(tc.name, func(t *testing.T) {
				id := newID()
				now := v.now
				first := pending(id, "o1", now)
				first.RawBodySHA256 = strings.Repeat("a", 64) // a claim carrying one writes none
				claimed := v.claim(t, first, now, idem.Claimed)
				raw := strings.Repeat("a", 64)
				if tc.reclaim {
					now = now.Add(lease)
					second := pending(id, "o2", now)
					second.RawBodySHA256 = strings.Repeat("b", 64)
					claimed = v.claim(t, second, now, idem.Reclaimed)
					raw = strings.Repeat("b", 64)
					now = now.Add(time.Second)
					if err := v.s.Renew(ctxT(t), id, "o2", now.Add(lease), now); err != nil {
						t.Fatal(err)
					}
				}
				before := v.raw(t, id)
				if before["rawBodySha256"] != nil || claimed.RawBodySHA256 != "" {
					t.Fatalf("the claim wrote a raw body hash: %v, %q", before["rawBodySha256"], claimed.RawBodySHA256)
				}
				claimed.RawBodySHA256 = raw // the attempt's, as the Guard hands it to the completion
				out := idem.Outcome{State: tc.state, Expires: now.Add(2 * keep)}
				if tc.state.Final() {
					out.Response = &idem.Response{Status: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: tc.body}
				}
				if tc.tx {
					out.Writes = []any{businessPut(biz, "run-"+rnd(4))}
				}
				if err := v.s.Complete(ctxT(t), claimed, out, now); err != nil {
					t.Fatal(err)
				}
				after := v.raw(t, id)
				for _, k := range []string{"pk", "digest", "owner", "attempt", "requestId"} {
					if before[k] == nil || !reflect.DeepEqual(before[k], after[k]) {
						t.Errorf("%s: pending %v, completed %v", k, before[k], after[k])
					}
				}
				if got, ok := after["rawBodySha256"].(*types.AttributeValueMemberS); !ok || got.Value != raw {
					t.Errorf("rawBodySha256 = %v, want the attempt's %s", after["rawBodySha256"], raw)
				}
				if tc.reclaim && (getN(t, after, "attempt") != 2 || after["owner"].(*types.AttributeValueMemberS).Value != "o2" ||
					after["requestId"].(*types.AttributeValueMemberS).Value != "req-o1") {
					t.Errorf("reclaimed item: %v", after)
				}
				if got := after["state"].(*types.AttributeValueMemberS).Value; got != string(tc.state) {
					t.Errorf("state = %s", got)
				}
				ttl := out.Expires.Unix() // the TTL attribute: seconds, rounded up
				if out.Expires.After(time.Unix(ttl, 0)) {
					ttl++
				}
				if getN(t, after, "expiresAtMs") != out.Expires.UnixMilli() || getN(t, after, "expiresAt") != ttl {
					t.Errorf("retention = %v / %v, want %d ms", after["expiresAtMs"], after["expiresAt"], out.Expires.UnixMilli())
				}
				var added, removed []string
				for k := range after {
					if before[k] == nil {
						added = append(added, k)
					}
				}
				for k := range before {
					if after[k] == nil {
						removed = append(removed, k)
					}
				}
				sort.Strings(added)
				sort.Strings(removed)
				if got, want := strings.Join(added, ","), strings.TrimSuffix("rawBodySha256,"+tc.response, ","); got != want {
					t.Errorf("attributes added by the completion = %q, want %q", got, want)
				}
				if got := strings.Join(removed, ","); got != "leaseAt,renewedAt" {
					t.Errorf("attributes removed by the completion = %q, want leaseAt,renewedAt", got)
				}
				// And the store reads it back as the claim completed.
				rec, ok, err := v.s.Get(ctxT(t), id, now)
				if err != nil || !ok || rec.State != tc.state || rec.Attempt != claimed.Attempt || rec.RequestID != claimed.RequestID ||
					rec.RawBodySHA256 != claimed.RawBodySHA256 || rec.Owner != claimed.Owner || !rec.Expires.Equal(out.Expires) {
					t.Fatalf("Get = %+v, %t, %v", rec, ok, err)
				}
				if tc.state.Final() && !bytes.Equal(rec.Response.Body, tc.body) {
					t.Fatal("response differs")
				}
			})
		}
	})
}

func getN(t *testing.T, m map[string]types.AttributeValue, k string) int64 {
	t.Helper()
	a, ok := m[k].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%s = %v, want a number", k, m[k])
	}
	v, err := strconv.ParseInt(a.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func names(m map[string]types.AttributeValue) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// TestPreviousLayoutIsRead: records completed by earlier versions (inline
// blob with respEnc, respSha, respLen, status; lease removed) are replayed
// byte-exactly, raw and deflated, and a corrupted one is refused.
func TestPreviousLayoutIsRead(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		body := []byte(`{"id":"run_01HZX","status":"accepted"}`)
		// Format v1: 1, status 201, one header, Content-Type: application/json, body.
		raw := []byte{1, 0xc9, 0x01, 1, 12}
		raw = append(raw, "Content-Type"...)
		raw = append(raw, 1, 16)
		raw = append(raw, "application/json"...)
		raw = append(raw, body...)
		var fl bytes.Buffer
		w, _ := flate.NewWriter(&fl, flate.BestSpeed)
		_, _ = w.Write(raw)
		_ = w.Close()
		for _, tc := range []struct {
			enc     string
			blob    []byte
			corrupt bool
		}{{"raw", raw, false}, {"flate", fl.Bytes(), false}, {"raw", raw, true}} {
			id := newID()
			sum := sha256.Sum256(tc.blob)
			if tc.corrupt {
				sum[0] ^= 1
			}
			exp := v.now.Add(keep)
			item := map[string]types.AttributeValue{
				"pk": s(id), "digest": s(digest), "state": s("completed"), "owner": s("old-owner"),
				"attempt": n(1), "requestId": s("req-old"), "expiresAtMs": n(exp.UnixMilli()), "expiresAt": n(exp.Unix() + 1),
				"status": n(201), "resp": &types.AttributeValueMemberB{Value: tc.blob}, "respEnc": s(tc.enc),
				"respSha": &types.AttributeValueMemberB{Value: sum[:]}, "respLen": n(int64(len(tc.blob))),
			}
			if _, err := v.e.Client().PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(v.table), Item: item}); err != nil {
				t.Fatal(err)
			}
			res, err := v.s.Claim(ctxT(t), pending(id, "o2", v.now), v.now)
			if tc.corrupt {
				if err == nil {
					t.Fatalf("corrupted previous-layout record replayed: %+v", res)
				}
				continue
			}
			if err != nil || res.Decision != idem.Exists {
				t.Fatalf("%s: Claim = %v, %v", tc.enc, res.Decision, err)
			}
			r := res.Record.Response
			if r.Status != 201 || !bytes.Equal(r.Body, body) || r.Headers["Content-Type"][0] != "application/json" {
				t.Fatalf("%s: replayed %d %v %q", tc.enc, r.Status, r.Headers, r.Body)
			}
		}
	})
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// TestRunAnswerStaysInline: a run API's 201 (runId, status and two URLs on
// an API Gateway host) is stored inside the record item, so a stream
// consumer (the multi-region conflict audit reads the runId of a stored
// 201 through DecodeItem) still sees it, while the item stays within one
// write unit.
func TestRunAnswerStaysInline(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		id := newID()
		base := "https://a1b2c3d4e5.execute-api.eu-central-1.amazonaws.com/runs/run_01JDXKQ7V3ZB8Y6R4N2M0P9Q8T"
		body := `{"eventsUrl":"` + base + `/events","runId":"tenant-a/run_01JDXKQ7V3ZB8Y6R4N2M0P9Q8T","status":"accepted","statusUrl":"` + base + `"}`
		r := pending(id, "owner-"+rnd(16), v.now)
		r.RequestID = "b7c6f0a2-3d7e-4c2b-9f1e-5a8d2c4e6f10"
		v.claim(t, r, v.now, idem.Claimed)
		c := v.rec(id, r.Owner)
		c.RawBodySHA256 = rnd(32) // the attempt's, as the Guard hands it to the completion
		if err := v.s.Complete(ctxT(t), c, done(body, v.now), v.now); err != nil {
			t.Fatal(err)
		}
		item := v.raw(t, id)
		if item["rawBodySha256"] == nil {
			t.Fatalf("completed item has no raw body hash: %s", names(item))
		}
		got, err := dynamostore.DecodeItem(item)
		if err != nil || got.Response == nil || string(got.Response.Body) != body {
			t.Fatalf("DecodeItem: %v, response %+v", err, got.Response)
		}
		if n := itemsize.Of(item); n > itemsize.WriteUnit {
			t.Fatalf("record item is %d bytes, want at most %d", n, itemsize.WriteUnit)
		}
	})
}

// TestLargeInlineRecordOfThePreviousVersionIsRead: the version before the
// record was held within 1 KB stored responses up to 350 KB inline (the
// tagged blob in resp alone); such records are replayed byte-exactly, in
// the same calls as before (the record carries the response), until they
// expire.
func TestLargeInlineRecordOfThePreviousVersionIsRead(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		b := body(40 << 10)
		blob := append([]byte{1, 0xc9, 0x01, 0}, b...) // format v1, raw: status 201, no header
		id := newID()
		exp := v.now.Add(keep)
		item := map[string]types.AttributeValue{
			"pk": s(id), "digest": s(digest), "state": s("completed"), "owner": s("old-owner"),
			"attempt": n(1), "requestId": s("req-old"), "expiresAtMs": n(exp.UnixMilli()), "expiresAt": n(exp.Unix() + 1),
			"resp": &types.AttributeValueMemberB{Value: blob},
		}
		if _, err := v.e.Client().PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(v.table), Item: item}); err != nil {
			t.Fatal(err)
		}
		v.cnt.Reset()
		rec := v.claim(t, pending(id, "o2", v.now), v.now, idem.Exists)
		if rec.Response == nil || rec.Response.Status != 201 || !bytes.Equal(rec.Response.Body, b) {
			t.Fatal("previous-version inline record not replayed byte-exactly")
		}
		want := 1
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			want = 2
		}
		if got := v.cnt.Total(); got != want {
			t.Errorf("replay: %d round trips %v, want %d", got, v.cnt.Ops(), want)
		}
	})
}
