package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestHTTPAPIReplaysEveryLayoutExactly: through the HTTP API adapter and
// the DynamoDB store, an answer replayed from each layout the store keeps
// (inline raw, inline deflated, one chunk item, several) is the first
// answer byte for byte but for the replay marker: status, every header
// and multi-value header with its values in order, the body, and whether
// it is base64 (a binary body), for bodies just below and above the
// inline bound, the deflate threshold and one and two chunk items, empty,
// text that deflates and binary that does not, on the three engines; the
// handler runs once per key.
func TestHTTPAPIReplaysEveryLayoutExactly(t *testing.T) {
	random := func(n int) []byte {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	text := func(n int) string { return strings.Repeat(`{"line":"an order line"},`, n/25+1)[:n] }
	const chunk = 350 << 10
	type answer struct {
		name   string
		status int
		body   string
		b64    bool
	}
	var answers []answer
	for _, n := range []int{0, 1, 300, 500, 511, 512, 560, 600, 640, 700, 900, 4 << 10, chunk - 200, chunk + 10, 2*chunk + 10} {
		answers = append(answers,
			answer{fmt.Sprintf("binary %d", n), 200, base64.StdEncoding.EncodeToString(random(n)), true},
			answer{fmt.Sprintf("text %d", n), 201, text(n), false})
	}
	answers = append(answers, answer{"terminal 422", 422, `{"error":"validation_error","message":"no"}`, false},
		answer{"redirect 303 empty", 303, "", false})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := newGuard(t, v, clock.NewManual(v.now))
		for _, a := range answers {
			t.Run(a.name, func(t *testing.T) {
				var runs atomic.Int32
				h := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs.Add(1)
					return events.APIGatewayV2HTTPResponse{StatusCode: a.status, Body: a.body, IsBase64Encoded: a.b64,
						Headers: map[string]string{"Content-Type": "application/octet-stream", "X-Order": "o-1", "Location": "/orders/o-1"},
						MultiValueHeaders: map[string][]string{"Link": {"</a>; rel=a", "</b>; rel=b", "</a>; rel=a"}, "X-Empty": {""},
							"Vary": {"Accept", "Accept-Language"}}}, nil
				})
				ev := guardEvent(newKey(), `{"order":1}`)
				first, err := h(ctxT(t), ev)
				if err != nil {
					t.Fatal(err)
				}
				ev.RequestContext.RequestID = "req-" + rnd(4)
				again, err := h(ctxT(t), ev)
				if err != nil {
					t.Fatal(err)
				}
				if runs.Load() != 1 {
					t.Fatalf("the handler ran %d times; want once", runs.Load())
				}
				if again.Headers[idem.HeaderOpenWOPReplay] == "" && again.MultiValueHeaders[idem.HeaderOpenWOPReplay] == nil {
					t.Fatalf("the second answer is no replay: %d %v", again.StatusCode, again.Headers)
				}
				strip := func(r events.APIGatewayV2HTTPResponse) events.APIGatewayV2HTTPResponse {
					h := map[string]string{}
					for k, v := range r.Headers {
						if k != idem.HeaderOpenWOPReplay {
							h[k] = v
						}
					}
					m := map[string][]string{}
					for k, v := range r.MultiValueHeaders {
						if k != idem.HeaderOpenWOPReplay {
							m[k] = v
						}
					}
					r.Headers, r.MultiValueHeaders = h, m
					return r
				}
				f, r := strip(first), strip(again)
				if f.StatusCode != r.StatusCode || f.Body != r.Body || f.IsBase64Encoded != r.IsBase64Encoded {
					t.Fatalf("replay %d b64=%t %d body bytes; first %d b64=%t %d body bytes", r.StatusCode, r.IsBase64Encoded, len(r.Body),
						f.StatusCode, f.IsBase64Encoded, len(f.Body))
				}
				if !reflect.DeepEqual(f.Headers, r.Headers) || !reflect.DeepEqual(f.MultiValueHeaders, r.MultiValueHeaders) ||
					!reflect.DeepEqual(f.Cookies, r.Cookies) {
					t.Fatalf("replay headers %v %v cookies %v; first %v %v cookies %v", r.Headers, r.MultiValueHeaders, r.Cookies,
						f.Headers, f.MultiValueHeaders, f.Cookies)
				}
				if f.Body != a.body || f.IsBase64Encoded != a.b64 || f.StatusCode != a.status {
					t.Fatalf("first answer: %d b64=%t %d body bytes; the handler's %d b64=%t %d", f.StatusCode, f.IsBase64Encoded, len(f.Body),
						a.status, a.b64, len(a.body))
				}
			})
		}
	})
}

// TestChunksOfARecordKeptForeverCarryNoTTL: a record kept forever (no
// retention) whose response is in chunk items has chunk items without a
// TTL or a retention either, so no TTL deletion or sweep removes a chunk
// of a record that never expires; its replay is exact on the three
// engines.
func TestChunksOfARecordKeptForeverCarryNoTTL(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		now := v.now
		id := newID()
		rec := pending(id, "o1", now)
		rec.Expires = time.Time{}
		v.claim(t, rec, now, idem.Claimed)
		want := bodyResponse(incompressible(t, 400<<10)) // two chunk items
		if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), idem.Outcome{State: idem.StateCompleted, Response: want}, now); err != nil {
			t.Fatal(err)
		}
		other := pending(id, "o2", now)
		other.Expires = time.Time{}
		got := v.claim(t, other, now.Add(400*24*time.Hour), idem.Exists)
		sameResponse(t, "replay a year on", got.Response, want)
		items := v.chunkItemsOf(t, id)
		if len(items) != 2 {
			t.Fatalf("%d chunk items, want 2", len(items))
		}
		for k, it := range append([]map[string]types.AttributeValue{v.raw(t, id)}, slices.Collect(maps.Values(items))...) {
			for _, a := range []string{"expiresAt", "expiresAtMs"} {
				if _, ok := it[a]; ok {
					t.Fatalf("item %d (0: the record) carries %s %v; want none (kept forever)", k, a, it[a])
				}
			}
		}
	})
}
