package dynamostore_test

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// overLimit is a JSON string body one byte over what a store keeps.
func overLimit() []byte {
	b := bytes.Repeat([]byte("x"), idem.MaxResponseBytes+1)
	b[0], b[len(b)-1] = '"', '"'
	return b
}

// together runs n calls of fn released at once by a barrier, and waits.
func together(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// notKeptAnswer checks r is 410 idemkit.response_not_kept with the
// original status and the response's size in details.
func notKeptAnswer(t *testing.T, r events.APIGatewayV2HTTPResponse, status, size int) {
	t.Helper()
	var env struct {
		Error   string         `json:"error"`
		Details map[string]any `json:"details"`
	}
	if r.StatusCode != 410 || json.Unmarshal([]byte(r.Body), &env) != nil || env.Error != idem.CodeResponseNotKept ||
		env.Details["status"] != float64(status) || env.Details["size"] != float64(size) || r.Headers[idem.HeaderRetryAfter] != "" {
		t.Fatalf("duplicate: %d %v %.300s; want 410 %s with status %d and size %d", r.StatusCode, r.Headers, r.Body,
			idem.CodeResponseNotKept, status, size)
	}
}

// TestGuardResponseOverTheLimitRunsOnce: on every engine, a handler
// answering a 2xx larger than idem.MaxResponseBytes, and a Guard.Once
// work returning a value that large, run once per key, sequentially and
// for parallel duplicates: the first caller gets the true answer, every
// other the final not-kept answer (410 idemkit.response_not_kept;
// idem.ErrNotKept for Once), never a re-run, also when the not-kept
// completion is throttled or applied with its answer lost (the SDK
// retries it). The round trips are those of
// a small response: 2 for the first execution (claim, completion), 1 for
// a duplicate (2 where the engine returns no item on a failed condition).
func TestGuardResponseOverTheLimitRunsOnce(t *testing.T) {
	big := overLimit()
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := newGuard(t, v, clock.NewManual(v.now))

		t.Run("HTTP", func(t *testing.T) {
			var runs atomic.Int32
			w := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.Add(1)
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(big)}, nil
			})
			key := newKey()
			lost := 1 // the claim's round trip, and a GetItem where the engine returns no item
			if !e.Caps.ReturnValuesOnConditionCheckFailure {
				lost = 2
			}
			var got []events.APIGatewayV2HTTPResponse
			for i := range 3 {
				v.cnt.Reset()
				got = append(got, call(t, w, guardEvent(key, `{"a":1}`)))
				want := lost
				if i == 0 {
					want = 2 // claim, completion
				}
				if n := v.cnt.Total(); n != want {
					t.Errorf("call %d: %d round trips %v, want %d", i+1, n, v.cnt.Ops(), want)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("sequential: handler ran %d times for one key, want 1", n)
			}
			if got[0].StatusCode != 201 || got[0].Body != string(big) {
				t.Fatalf("first: %d, %d bytes", got[0].StatusCode, len(got[0].Body))
			}
			for _, r := range got[1:] {
				notKeptAnswer(t, r, 201, len(big))
			}

			runs.Store(0)
			key = newKey()
			const n = 6
			out := make([]events.APIGatewayV2HTTPResponse, n)
			together(n, func(i int) { out[i] = call(t, w, guardEvent(key, `{"a":1}`)) })
			if got := runs.Load(); got != 1 {
				t.Fatalf("parallel: handler ran %d times for one key, want 1", got)
			}
			firsts := 0
			for _, r := range out {
				if r.StatusCode == 201 && r.Body == string(big) {
					firsts++
					continue
				}
				notKeptAnswer(t, r, 201, len(big))
			}
			if firsts != 1 {
				t.Fatalf("parallel: %d callers got the true response, want 1", firsts)
			}
		})

		// The not-kept completion throttled, or applied with its answer
		// lost, is retried by the SDK: the handler still runs once, and
		// every duplicate is the not-kept answer.
		for name, inject := range map[string]func(){
			"CompletionThrottled": func() { v.f.PassNext("PutItem", 1); v.f.FailNext("PutItem", 2, dynamotest.Throttle()) },
			"CompletionAppliedResponseLost": func() {
				v.f.PassNext("PutItem", 1)
				v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
			},
		} {
			t.Run(name, func(t *testing.T) {
				v.f.Clear()
				var runs atomic.Int32
				w := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs.Add(1)
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: string(big)}, nil
				})
				key := newKey()
				inject()
				first := call(t, w, guardEvent(key, `{"a":1}`))
				if v.f.Pending() != 0 || v.f.Fired() == 0 {
					t.Fatalf("faults not consumed: pending %d", v.f.Pending())
				}
				var dups []events.APIGatewayV2HTTPResponse
				for range 2 {
					dups = append(dups, call(t, w, guardEvent(key, `{"a":1}`)))
				}
				if n := runs.Load(); n != 1 {
					t.Fatalf("handler ran %d times for one key, want 1", n)
				}
				if first.StatusCode != 201 || first.Body != string(big) {
					t.Fatalf("first: %d, %d bytes", first.StatusCode, len(first.Body))
				}
				for _, r := range dups {
					notKeptAnswer(t, r, 201, len(big))
				}
			})
		}

		t.Run("Once", func(t *testing.T) {
			var runs atomic.Int32
			work := func(key string) idem.Work {
				return idem.Work{Operation: "export", Key: key, Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
					runs.Add(1)
					return big, nil
				}}
			}
			key := newKey()
			type result struct {
				v   []byte
				ran bool
				err error
			}
			var seq []result
			for range 3 {
				val, ran, err := g.Once(ctxT(t), work(key))
				seq = append(seq, result{val, ran, err})
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("sequential: work ran %d times for one key, want 1", n)
			}
			if r := seq[0]; r.err != nil || !r.ran || !bytes.Equal(r.v, big) {
				t.Fatalf("first: ran %t, err %v, %d bytes", r.ran, r.err, len(r.v))
			}
			for _, r := range seq[1:] {
				if !errors.Is(r.err, idem.ErrNotKept) || r.ran || r.v != nil {
					t.Fatalf("duplicate: ran %t, err %v, %d bytes; want ErrNotKept", r.ran, r.err, len(r.v))
				}
			}

			runs.Store(0)
			key = newKey()
			const n = 6
			out := make([]result, n)
			together(n, func(i int) {
				val, ran, err := g.Once(ctxT(t), work(key))
				out[i] = result{val, ran, err}
			})
			if got := runs.Load(); got != 1 {
				t.Fatalf("parallel: work ran %d times for one key, want 1", got)
			}
			firsts := 0
			for i, r := range out {
				switch {
				case r.err == nil && r.ran && bytes.Equal(r.v, big):
					firsts++
				case errors.Is(r.err, idem.ErrNotKept) && !r.ran:
				default:
					t.Fatalf("call %d: ran %t, err %v, %d bytes", i, r.ran, r.err, len(r.v))
				}
			}
			if firsts != 1 {
				t.Fatalf("parallel: %d calls got the value, want 1", firsts)
			}
		})
	})
}

// TestCostOfANotKeptOutcome pins what a not-kept outcome costs, whatever
// the size of the response that was not kept: its completion is one
// conditional write of the record item alone (no chunk items), so a
// first execution is 2 calls and 2 write units, and a replay is the
// claim's one call and one write unit (plus the consistent GetItem where
// the engine returns no item on a failed condition), as for a small
// response; the item holds no body.
func TestCostOfANotKeptOutcome(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		m := dynamotest.NewMeter(e.Client(), "pk")
		v.s = newStore(t, e.Client(m.Middleware()), v.table)
		get := 0
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			get = 1
		}
		for _, size := range []int{idem.MaxResponseBytes + 1, 1 << 30} {
			id := newID()
			m.Take()
			v.claim(t, pending(id, "o1", v.now), v.now, idem.Claimed)
			first := costOf(m.Take())
			out := idem.Outcome{State: idem.StateCompleted, Expires: v.now.Add(keep), Response: &idem.Response{Status: 201, NotKept: size}}
			if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, v.now); err != nil {
				t.Fatal(err)
			}
			c := costOf(m.Take())
			first.calls += c.calls
			first.writeExisting += c.writeExisting
			first.writeLarger += c.writeLarger
			rec := v.claim(t, pending(id, "o2", v.now), v.now, idem.Exists)
			replay := costOf(m.Take())
			if r := rec.Response; r == nil || r.Status != 201 || r.NotKept != size || len(r.Body) != 0 || len(r.Headers) != 0 {
				t.Fatalf("%d B: replayed %+v", size, r)
			}
			if want := (cost{calls: 2, writeExisting: 2, writeLarger: 2}); first != want {
				t.Errorf("first at %d B not kept: %v, want %v", size, first, want)
			}
			if want := (cost{calls: 1 + get, writeExisting: 1, writeLarger: 1, rd: get}); replay != want {
				t.Errorf("replay at %d B not kept: %v, want %v", size, replay, want)
			}
			if n := v.chunkItems(t); n != 0 {
				t.Errorf("%d chunk items after a not-kept completion", n)
			}
		}
	})
}

// TestRecordsWithoutTheNotKeptMarkReadAsBefore: completed records as the
// versions before the not-kept mark wrote them read exactly as before, by
// a replay's claim and by Get: the inline tagged blob (format v1 raw, and
// deflated behind its tag) in resp alone, and the earlier layout with
// respEnc, respSha and respLen. Each gives its status, headers and body,
// and NotKept zero.
func TestRecordsWithoutTheNotKeptMarkReadAsBefore(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		body := bytes.Repeat([]byte(`{"row":1},`), 60)
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
		rawSum, flSum := sha256.Sum256(raw), sha256.Sum256(fl.Bytes())
		for name, extra := range map[string]map[string]types.AttributeValue{
			"inline-raw":   {"resp": &types.AttributeValueMemberB{Value: raw}},
			"inline-flate": {"resp": &types.AttributeValueMemberB{Value: append([]byte{2}, fl.Bytes()...)}},
			"earlier-raw": {"resp": &types.AttributeValueMemberB{Value: raw}, "respEnc": s("raw"), "status": n(201),
				"respSha": &types.AttributeValueMemberB{Value: rawSum[:]}, "respLen": n(int64(len(raw)))},
			"earlier-flate": {"resp": &types.AttributeValueMemberB{Value: fl.Bytes()}, "respEnc": s("flate"), "status": n(201),
				"respSha": &types.AttributeValueMemberB{Value: flSum[:]}, "respLen": n(int64(fl.Len()))},
		} {
			id := newID()
			exp := v.now.Add(keep)
			item := map[string]types.AttributeValue{
				"pk": s(id), "digest": s(digest), "state": s("completed"), "owner": s("old-owner"),
				"attempt": n(1), "requestId": s("req-old"), "expiresAtMs": n(exp.UnixMilli()), "expiresAt": n(exp.Unix() + 1),
			}
			for k, a := range extra {
				item[k] = a
			}
			if _, err := v.e.Client().PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(v.table), Item: item}); err != nil {
				t.Fatal(err)
			}
			rec := v.claim(t, pending(id, "o2", v.now), v.now, idem.Exists)
			got, found, err := v.s.Get(ctxT(t), id, v.now)
			if err != nil || !found {
				t.Fatalf("%s: Get: %v, found %t", name, err, found)
			}
			for _, r := range []*idem.Response{rec.Response, got.Response} {
				if r == nil || r.NotKept != 0 || r.Status != 201 || !bytes.Equal(r.Body, body) ||
					len(r.Headers) != 1 || r.Headers["Content-Type"][0] != "application/json" {
					t.Fatalf("%s: read %+v", name, r)
				}
			}
		}
	})
}
