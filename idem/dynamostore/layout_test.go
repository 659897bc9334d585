package dynamostore_test

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCompletedItemIsLean: a completed record with an inline response holds
// only attributes a decision reads (no encoding, length, checksum or status
// copies), and a retryable completion adds none.
func TestCompletedItemIsLean(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		id := newID()
		v.claim(t, pending(id, "o1", v.now), v.now, idem.Claimed)
		if err := v.s.Complete(ctxT(t), id, "o1", done(`{"ok":true}`, v.now), v.now); err != nil {
			t.Fatal(err)
		}
		// leaseAt and renewedAt (the owner's liveness) are left in place by a
		// completion rather than spend a REMOVE on them; only pending reads them.
		want := "attempt,digest,expiresAt,expiresAtMs,leaseAt,owner,pk,renewedAt,requestId,resp,state"
		if got := names(v.raw(t, id)); got != want {
			t.Fatalf("completed item attributes = %s, want %s", got, want)
		}
		id2 := newID()
		v.claim(t, pending(id2, "o1", v.now), v.now, idem.Claimed)
		if err := v.s.Complete(ctxT(t), id2, "o1", idem.Outcome{State: idem.StateRetryableFailure, Expires: v.now.Add(keep)}, v.now); err != nil {
			t.Fatal(err)
		}
		want = "attempt,digest,expiresAt,expiresAtMs,leaseAt,owner,pk,renewedAt,requestId,state"
		if got := names(v.raw(t, id2)); got != want {
			t.Fatalf("retryable item attributes = %s, want %s", got, want)
		}
		// The lease left on a finished record is not reported.
		got, ok, err := v.s.Get(ctxT(t), id, v.now)
		if err != nil || !ok || !got.LeaseExpires.IsZero() || !got.Renewed.IsZero() {
			t.Fatalf("Get = %+v, %t, %v; want a record without lease", got, ok, err)
		}
	})
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
