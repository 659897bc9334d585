package dynamostore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestNotKeptOutcomeWithTransactionalWrites: a handler that registers a
// business write (idem.Transact, as the runs store's create commits its
// run with the 201) and answers a 2xx too large to keep. The not-kept
// outcome commits in the one transaction with the business write: the
// write lands exactly once, the handler runs once, the first caller gets
// the true response and every duplicate 410 idemkit.response_not_kept.
// The same holds when the transaction is throttled (the SDK retries it),
// applied with its answer lost once (the SDK's retry fails its conditions
// and the store recognises its own write), and applied with its answer
// lost on every attempt (the Guard's release is fenced by the completed
// record, which, read back, is its own completion: the first caller gets
// the true response, not a 503 whose retry could only be told 410).
// Throttled past the SDK's retries, nothing commits: the
// caller gets 503, the retry runs the handler again and commits the
// write once. On engines with transactions (DynamoDB Local, moto);
// dynalite's refusal of transactional completions is
// TestGuardFencedTransactionalCompletion's.
func TestNotKeptOutcomeWithTransactionalWrites(t *testing.T) {
	big := overLimit()
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		biz := e.CreateTable(t, "RunsTable")
		g := newGuard(t, v, clock.NewManual(v.now))
		const op = "TransactWriteItems"

		for _, c := range []struct {
			name string
			// inject arms the faults for the first request's completion.
			inject func()
			// runs is how many times the handler runs for the key.
			runs int32
			// firstStatus is the first caller's answer.
			firstStatus int
		}{
			{"plain", func() {}, 1, 201},
			{"throttled", func() { v.f.FailNext(op, 2, dynamotest.Throttle()) }, 1, 201},
			{"applied, answer lost once", func() { v.f.FailNextAfterSend(op, 1, dynamotest.ResponseLost()) }, 1, 201},
			{"applied, answer lost on every attempt", func() { v.f.FailNextAfterSend(op, 3, dynamotest.ResponseLost()) }, 1, 201},
			{"throttled past the retries", func() { v.f.FailNext(op, 3, dynamotest.Throttle()) }, 2, 503},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				run := "run-" + rnd(8)
				var runs atomic.Int32
				w := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs.Add(1)
					if err := idem.Transact(ctx, businessPut(biz, run)); err != nil {
						return events.APIGatewayV2HTTPResponse{}, err
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
						Body: string(big)}, nil
				})
				key := newKey()
				c.inject()
				first := call(t, w, guardEvent(key, `{"a":1}`))
				if v.f.Pending() != 0 {
					t.Fatalf("faults not consumed: %d pending", v.f.Pending())
				}
				switch c.firstStatus {
				case 201:
					if first.StatusCode != 201 || first.Body != string(big) {
						t.Fatalf("first: %d, %d bytes; want 201 and the true %d bytes", first.StatusCode, len(first.Body), len(big))
					}
				default:
					if first.StatusCode != c.firstStatus {
						t.Fatalf("first: %d %.300s; want %d", first.StatusCode, first.Body, c.firstStatus)
					}
				}
				if c.runs == 2 {
					// Nothing committed: the retry runs and answers the truth.
					if businessExists(t, v.c, biz, run) {
						t.Fatal("the business write landed although its transaction failed")
					}
					r := call(t, w, guardEvent(key, `{"a":1}`))
					if r.StatusCode != 201 || r.Body != string(big) {
						t.Fatalf("retry: %d, %d bytes; want 201 and the true response", r.StatusCode, len(r.Body))
					}
				}
				var dups []events.APIGatewayV2HTTPResponse
				for range 2 {
					dups = append(dups, call(t, w, guardEvent(key, `{"a":1}`)))
				}
				const n = 4
				par := make([]events.APIGatewayV2HTTPResponse, n)
				together(n, func(i int) { par[i] = call(t, w, guardEvent(key, `{"a":1}`)) })
				if got := runs.Load(); got != c.runs {
					t.Fatalf("handler ran %d times for one key, want %d", got, c.runs)
				}
				if !businessExists(t, v.c, biz, run) {
					t.Fatal("the business write committed with the not-kept outcome is missing")
				}
				for _, r := range append(dups, par...) {
					notKeptAnswer(t, r, 201, len(big))
				}
				rec, found, err := v.s.Get(ctxT(t), keyspace.ID("tenant:acme", "POST /runs", key), v.now)
				if err != nil || !found || rec.State != idem.StateCompleted || rec.Response == nil ||
					rec.Response.NotKept != len(big) || len(rec.Response.Body) != 0 {
					t.Fatalf("record: found %t, err %v, %+v", found, err, rec)
				}
				if n := v.chunkItems(t); n != 0 {
					t.Errorf("%d chunk items after not-kept completions", n)
				}
			})
		}
	})
}
