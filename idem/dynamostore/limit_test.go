package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestResponseAtTheLimitIsKept: through the Guard on every engine, a 2xx
// whose body is exactly idem.MaxResponseBytes is kept (in chunk items)
// and replayed byte-exactly, headers included, whether the body
// compresses or not; one byte more is recorded as not kept (410 for its
// duplicates, no chunk items). The handler runs once per key either way.
// Where the engine has transactions, the response at the limit also
// commits with a business write (idem.Transact): its chunks are written
// before the transaction that references them.
func TestResponseAtTheLimitIsKept(t *testing.T) {
	random := make([]byte, idem.MaxResponseBytes+1)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	compressible := bytes.Repeat([]byte(`{"row":"abcdefgh","n":12345678},`), idem.MaxResponseBytes/32+1)
	headers := map[string]string{"Content-Type": "application/json", "X-Export": "part-1", "ETag": `"v1"`}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		biz := ""
		if e.Caps.Transactions {
			biz = e.CreateTable(t, "RunsTable")
		}
		for _, c := range []struct {
			name  string
			body  []byte
			kept  bool
			write bool
		}{
			{"random, at the limit", random[:idem.MaxResponseBytes], true, false},
			{"compressible, at the limit", compressible[:idem.MaxResponseBytes], true, false},
			{"random, one byte over", random[:idem.MaxResponseBytes+1], false, false},
			{"compressible, one byte over", compressible[:idem.MaxResponseBytes+1], false, false},
			{"random, at the limit, transactional", random[:idem.MaxResponseBytes], true, true},
			{"random, one byte over, transactional", random[:idem.MaxResponseBytes+1], false, true},
		} {
			if c.write && biz == "" {
				// No transactions (dynalite): its refusal of a
				// transactional completion is
				// TestGuardFencedTransactionalCompletion's.
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				// A table of its own: the chunk items counted before and
				// after the first execution are this case's alone, and
				// each count scans one response's chunks, not those of
				// every case before it.
				v := setup(t, e)
				g := newGuard(t, v, clock.NewManual(v.now))
				run := "run-" + rnd(8)
				body := string(c.body)
				var runs atomic.Int32
				w := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs.Add(1)
					if c.write {
						if err := idem.Transact(ctx, businessPut(biz, run)); err != nil {
							return events.APIGatewayV2HTTPResponse{}, err
						}
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: headers, Body: body}, nil
				})
				key := newKey()
				before := v.chunkItems(t)
				first := call(t, w, guardEvent(key, `{"a":1}`))
				if first.StatusCode != 200 || first.Body != body {
					t.Fatalf("first: %d, %d bytes; want 200 and the true %d bytes", first.StatusCode, len(first.Body), len(body))
				}
				chunks := v.chunkItems(t) - before
				for i := range 2 {
					r := call(t, w, guardEvent(key, `{"a":1}`))
					if !c.kept {
						notKeptAnswer(t, r, 200, len(body))
						continue
					}
					if r.StatusCode != 200 || r.Body != body || r.Headers[idem.HeaderOpenWOPReplay] != "true" {
						t.Fatalf("duplicate %d: %d, %d bytes, replayed %q; want the byte-exact replay of %d bytes",
							i+1, r.StatusCode, len(r.Body), r.Headers[idem.HeaderOpenWOPReplay], len(body))
					}
					for k, want := range headers {
						if got := headerOf(r.Headers, k); got != want {
							t.Fatalf("duplicate %d: header %s = %q, want %q", i+1, k, headerOf(r.Headers, k), want)
						}
					}
				}
				if n := runs.Load(); n != 1 {
					t.Fatalf("handler ran %d times for one key, want 1", n)
				}
				if c.write && !businessExists(t, v.c, biz, run) {
					t.Fatal("the business write is missing")
				}
				rec, found, err := v.s.Get(ctxT(t), keyspace.ID("tenant:acme", "POST /runs", key), v.now)
				if err != nil || !found || rec.Response == nil {
					t.Fatalf("record: found %t, err %v", found, err)
				}
				if c.kept && (rec.Response.NotKept != 0 || !bytes.Equal(rec.Response.Body, c.body)) {
					t.Fatalf("record at the limit: NotKept %d, %d body bytes", rec.Response.NotKept, len(rec.Response.Body))
				}
				if !c.kept && rec.Response.NotKept != len(body) {
					t.Fatalf("record over the limit: NotKept %d, want %d", rec.Response.NotKept, len(body))
				}
				if c.kept != (chunks > 0) {
					t.Errorf("%d chunk items in the table after the first execution (kept %t)", chunks, c.kept)
				}
			})
		}
	})
}

// TestResponseAtTheLimitWithLargeHeaders: a body exactly at
// idem.MaxResponseBytes with headers beyond the room the store keeps for
// them (the net/http middleware puts no bound on a handler's headers).
// The store refuses to write what it could not read back (Complete:
// idem.ErrTooLarge, no chunk item), so the Guard records the response as
// not kept: the handler runs once, its caller gets the true response and
// every duplicate 410 idemkit.response_not_kept; with a business write
// (idem.Transact) too, which commits once. Before, the response was
// written, and every duplicate was answered 500 internal_error, "retry",
// for as long as the record was kept: a replay refused to inflate it.
func TestResponseAtTheLimitWithLargeHeaders(t *testing.T) {
	body := strings.Repeat("x", idem.MaxResponseBytes)
	headers := map[string]string{"Content-Type": "text/plain"}
	for i := range 3 {
		headers["X-Large-"+string(rune('a'+i))] = strings.Repeat("h", 400<<10)
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := newGuard(t, v, clock.NewManual(v.now))
		var runs atomic.Int32
		w := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: headers, Body: body}, nil
		})
		key := newKey()
		if r := call(t, w, guardEvent(key, `{"a":1}`)); r.StatusCode != 200 || r.Body != body {
			t.Fatalf("first: %d, %d bytes", r.StatusCode, len(r.Body))
		}
		for range 2 {
			notKeptAnswer(t, call(t, w, guardEvent(key, `{"a":1}`)), 200, len(body))
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times for one key, want 1", n)
		}

		// With a business write (idem.Transact): the refused completion
		// wrote nothing, so the not-kept one commits the write, once.
		if e.Caps.Transactions {
			biz, run := e.CreateTable(t, "RunsTable"), "run-"+rnd(8)
			var truns atomic.Int32
			tw := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				truns.Add(1)
				if err := idem.Transact(ctx, businessPut(biz, run)); err != nil {
					return events.APIGatewayV2HTTPResponse{}, err
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: headers, Body: body}, nil
			})
			key, before := newKey(), v.chunkItems(t)
			if r := call(t, tw, guardEvent(key, `{"a":1}`)); r.StatusCode != 201 || r.Body != body {
				t.Fatalf("transactional first: %d, %d bytes", r.StatusCode, len(r.Body))
			}
			for range 2 {
				notKeptAnswer(t, call(t, tw, guardEvent(key, `{"a":1}`)), 201, len(body))
			}
			if n := truns.Load(); n != 1 {
				t.Fatalf("transactional: handler ran %d times for one key, want 1", n)
			}
			if !businessExists(t, v.c, biz, run) {
				t.Fatal("transactional: the business write is missing")
			}
			if n := v.chunkItems(t) - before; n != 0 {
				t.Errorf("transactional: %d chunk items written", n)
			}
		}

		// The store itself: refused, nothing written.
		id := newID()
		v.claim(t, pending(id, "o1", v.now), v.now, idem.Claimed)
		hs := make(map[string][]string, len(headers))
		for k, x := range headers {
			hs[k] = []string{x}
		}
		before := v.chunkItems(t)
		out := idem.Outcome{State: idem.StateCompleted, Expires: v.now.Add(keep), Response: &idem.Response{Status: 200, Headers: hs, Body: []byte(body)}}
		if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, v.now); !errors.Is(err, idem.ErrTooLarge) {
			t.Fatalf("Complete: %v, want ErrTooLarge", err)
		}
		if n := v.chunkItems(t) - before; n != 0 {
			t.Errorf("%d chunk items written by a refused completion", n)
		}
		if rec, found, err := v.s.Get(ctxT(t), id, v.now); err != nil || !found || rec.State != idem.StatePending {
			t.Fatalf("record after a refused completion: found %t, err %v, state %s", found, err, rec.State)
		}
	})
}

// headerOf returns the value of header name in h, matched without regard
// to case (a replay names headers in their canonical form).
func headerOf(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
