package idem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// errTaken is a host's cause for its own write condition failing.
var errTaken = errors.New("test: the order's slot is taken")

// takeOrderOne runs a first request whose transactional write takes the
// slot "order-1", so that a later request's write of it fails its
// condition at completion.
func takeOrderOne(t *testing.T, e *env) {
	t.Helper()
	if r := e.call(&handler{before: func(ctx context.Context) {
		_ = idem.Transact(ctx, memstore.Write{Key: "order-1", Value: []byte("first"), IfAbsent: true})
	}}, v2event("POST", "POST /orders", "k_first_key_0123456789ab", `{}`)); r.StatusCode != 201 {
		t.Fatalf("the first order: %+v", r)
	}
}

// TestConflictAnsweredByHandler: a handler whose transactional write
// fails its own condition at completion has the cause of that write
// (TransactOr) answered by its own answer (OnConflict) instead of 500:
// nothing of its writes commits, and the record ends as the policy says
// for the answer (a forgotten 409 run_already_active deletes it, so the
// key runs afresh; a final 422 is recorded and replayed). Without a
// cause, or an answer for it, the cancelled completion is 500 and the
// record released, as before.
func TestConflictAnsweredByHandler(t *testing.T) {
	held := &idem.Response{Status: 409, Headers: map[string][]string{"Content-Type": {"application/json"}, "Retry-After": {"5"}},
		Body: []byte(`{"error":"run_already_active","message":"held"}`)}
	final := &idem.Response{Status: 422, Headers: map[string][]string{"Content-Type": {"application/json"}},
		Body: []byte(`{"error":"unprocessable","message":"taken"}`)}
	for _, tc := range []struct {
		name   string
		cause  error
		answer *idem.Response
		status int
		// kept is true when the key's next request replays (the
		// answer was recorded), false when it runs the handler again.
		kept bool
	}{
		{"forgotten", errTaken, held, 409, false},
		{"final", errTaken, final, 422, true},
		{"no cause", nil, held, 500, false},
		{"no answer", errTaken, nil, 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			takeOrderOne(t, e)
			var index []int
			h := &handler{before: func(ctx context.Context) {
				_ = idem.Transact(ctx, memstore.Write{Key: "audit", Value: []byte("a")})
				err := idem.TransactOr(ctx, func(_ context.Context, i int) error {
					index = append(index, i)
					return tc.cause
				}, memstore.Write{Key: "log", Value: []byte("l")}, memstore.Write{Key: "order-1", Value: []byte("second"), IfAbsent: true})
				if err != nil {
					t.Errorf("TransactOr: %v", err)
				}
				if err := idem.OnConflict(ctx, func(cause error) *idem.Response {
					if errors.Is(cause, errTaken) {
						return tc.answer
					}
					return nil
				}); err != nil {
					t.Errorf("OnConflict: %v", err)
				}
			}}
			ev := v2event("POST", "POST /orders", testKey, `{}`)
			r := e.call(h, ev)
			if r.StatusCode != tc.status {
				t.Fatalf("answered %d %v %s, want %d", r.StatusCode, r.Headers, r.Body, tc.status)
			}
			if tc.status == 409 && r.Headers["Retry-After"] != "5" {
				t.Fatalf("the answer's headers: %v", r.Headers)
			}
			// An answered conflict is the host's outcome, not a failed
			// store write; an unanswered one is logged as one.
			answered := strings.Contains(e.logs.String(), "answered by the handler")
			failed := strings.Contains(e.logs.String(), "store write failed")
			if answered != (tc.status != 500) || failed != (tc.status == 500) {
				t.Fatalf("logs (answered %v, failed write %v):\n%s", answered, failed, e.logs.String())
			}
			// The cause is asked about the failed write, by its index
			// among the writes registered with it.
			if len(index) != 1 || index[0] != 1 {
				t.Fatalf("the cause was asked about writes %v, want [1]", index)
			}
			for _, k := range []string{"audit", "log"} {
				if _, ok := e.store.Item(k); ok {
					t.Fatalf("a cancelled completion committed %q", k)
				}
			}
			if v, _ := e.store.Item("order-1"); string(v) != "first" {
				t.Fatalf("order-1 is %q", v)
			}
			r2 := e.call(h, ev)
			if tc.kept {
				if h.Calls() != 1 || r2.StatusCode != tc.status || r2.Body != r.Body {
					t.Fatalf("the key again: %d %s after %d calls, want the recorded %d replayed", r2.StatusCode, r2.Body, h.Calls(), tc.status)
				}
				return
			}
			if h.Calls() != 2 {
				t.Fatalf("the key again ran the handler %d times in all, want 2 (record forgotten or released)", h.Calls())
			}
		})
	}
	// Guard.Once has no response to answer with: its cancelled
	// completion stays ErrNotCommitted, whatever the handler answers.
	e := newEnv(t, nil)
	if _, _, err := e.guard.Once(context.Background(), idem.Work{Operation: "order", Key: "first", Run: func(ctx context.Context) ([]byte, error) {
		return []byte(`{}`), idem.Transact(ctx, memstore.Write{Key: "order-1", Value: []byte("first"), IfAbsent: true})
	}}); err != nil {
		t.Fatal(err)
	}
	asked := false
	_, _, err := e.guard.Once(context.Background(), idem.Work{Operation: "order", Key: "second", Run: func(ctx context.Context) ([]byte, error) {
		_ = idem.OnConflict(ctx, func(error) *idem.Response { return &idem.Response{Status: 200, Body: []byte(`{"answer":1}`)} })
		return []byte(`{}`), idem.TransactOr(ctx, func(context.Context, int) error { asked = true; return errTaken },
			memstore.Write{Key: "order-1", Value: []byte("second"), IfAbsent: true})
	}})
	if !errors.Is(err, idem.ErrNotCommitted) || asked {
		t.Fatalf("Once with a conflicting write: %v (cause asked: %v), want ErrNotCommitted", err, asked)
	}
	// The cause stays matchable: a write whose own condition failed will
	// not clear on a retry, unlike a store outage (an event consumer can
	// tell the two apart, instead of retrying it until it is dead-lettered).
	var conflict *idem.WriteConflictError
	if !errors.Is(err, idem.ErrWriteConflict) || !errors.As(err, &conflict) {
		t.Fatalf("Once with a conflicting write: %v, want the store's *WriteConflictError wrapped", err)
	}
	if err := idem.TransactOr(context.Background(), nil, 1); !errors.Is(err, idem.ErrNoClaim) {
		t.Fatalf("TransactOr outside a claim: %v", err)
	}
	if err := idem.OnConflict(context.Background(), nil); !errors.Is(err, idem.ErrNoClaim) {
		t.Fatalf("OnConflict outside a claim: %v", err)
	}
}

// TestConflictAnswerTheStoreRefusesRunsOnce: a handler's answer to its
// write's conflict (OnConflict) that the policy keeps but the store
// refuses (its status, headers and body take more than the 7 MB every
// store keeps: ErrTooLarge) is recorded as not kept, as the handler's own response
// would be: its caller gets the answer, a duplicate 410
// idemkit.response_not_kept, and the handler never runs again. Released,
// every retry ran the handler again.
func TestConflictAnswerTheStoreRefusesRunsOnce(t *testing.T) {
	e := newEnv(t, nil)
	takeOrderOne(t, e)
	body := `{"error":"unprocessable","message":"taken"}`
	answer := &idem.Response{Status: 422, Headers: map[string][]string{"Content-Type": {"application/json"},
		"X-Trace": {strings.Repeat("t", idem.MaxResponseBytes+1<<20)}}, Body: []byte(body)}
	h := &handler{before: func(ctx context.Context) {
		_ = idem.TransactOr(ctx, func(context.Context, int) error { return errTaken },
			memstore.Write{Key: "order-1", Value: []byte("second"), IfAbsent: true})
		_ = idem.OnConflict(ctx, func(error) *idem.Response { return answer })
	}}
	ev := v2event("POST", "POST /orders", testKey, `{}`)
	if r := e.call(h, ev); r.StatusCode != 422 || r.Body != body {
		t.Fatalf("answered %d %.200s, want the handler's 422", r.StatusCode, r.Body)
	}
	for range 2 {
		r := e.call(h, ev)
		wantNotKept(t, r.StatusCode, headerOf(r.Headers), []byte(r.Body), 422, len(body))
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want once", h.Calls())
	}
}

// TestConflictAnswerOverLambdaPayloadRunsOnce: a handler's answer to its
// write's conflict (OnConflict) that the policy keeps, within
// MaxResponseBytes but too large for Lambda to return once encoded (a
// JSON body escaped past 6 MB), is recorded as not kept, as the handler's
// own response is (TestLambdaPayloadOverTheLimitIsNotKept): its caller
// gets the answer (which API Gateway answers 502), a duplicate 410
// idemkit.response_not_kept, and the handler never runs again. Kept, it
// was replayed into the same failed invocation to every retry, forever.
// Through both API Gateway adapters; outside a Lambda invocation the
// answer is kept and replayed as before.
func TestConflictAnswerOverLambdaPayloadRunsOnce(t *testing.T) {
	body := "[" + strings.Repeat(`"",`, 1_300_000) + `""]` // 3.9 MB, 6.5 MB escaped
	answer := func() *idem.Response {
		return &idem.Response{Status: 422, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body)}
	}
	before := func(ctx context.Context) {
		_ = idem.TransactOr(ctx, func(context.Context, int) error { return errTaken },
			memstore.Write{Key: "order-1", Value: []byte("second"), IfAbsent: true})
		_ = idem.OnConflict(ctx, func(error) *idem.Response { return answer() })
	}
	t.Run("HTTP API", func(t *testing.T) {
		e := newEnv(t, nil)
		takeOrderOne(t, e)
		h := &handler{before: before}
		ev := v2event("POST", "POST /orders", testKey, `{}`)
		r, _ := e.guard.HTTPAPI(h.v2)(invocation(), ev)
		if r.StatusCode != 422 || r.Body != body {
			t.Fatalf("answered %d %.200s, want the handler's 422", r.StatusCode, r.Body)
		}
		if lambdaPayload(t, r) <= 6<<20 {
			t.Fatalf("test data: payload %d bytes, within the limit", lambdaPayload(t, r))
		}
		for range 2 {
			r, _ := e.guard.HTTPAPI(h.v2)(invocation(), ev)
			wantNotKept(t, r.StatusCode, headerOf(r.Headers), []byte(r.Body), 422, len(body))
		}
		if h.Calls() != 1 {
			t.Fatalf("handler ran %d times, want once", h.Calls())
		}
	})
	t.Run("REST", func(t *testing.T) {
		e := newEnv(t, nil)
		takeOrderOne(t, e)
		runs := 0
		h := e.guard.REST(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			runs++
			before(ctx)
			return events.APIGatewayProxyResponse{StatusCode: 201, Body: `{}`}, nil
		})
		if r, _ := h(invocation(), v1ev(testKey)); r.StatusCode != 422 || r.Body != body {
			t.Fatalf("answered %d %.200s, want the handler's 422", r.StatusCode, r.Body)
		}
		r, _ := h(invocation(), v1ev(testKey))
		hdr := http.Header{}
		for k, v := range r.Headers {
			hdr.Set(k, v)
		}
		wantNotKept(t, r.StatusCode, hdr, []byte(r.Body), 422, len(body))
		if runs != 1 {
			t.Fatalf("handler ran %d times, want once", runs)
		}
	})
	t.Run("net/http behind the proxy", func(t *testing.T) {
		e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = idem.SingleTenant("t") })
		takeOrderOne(t, e)
		runs := 0
		h := e.guard.Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs++
			before(r.Context())
			w.WriteHeader(201)
		}))
		call := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)).WithContext(invocation())
			req.Header.Set("Idempotency-Key", testKey)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w
		}
		if w := call(); w.Code != 422 || w.Body.String() != body {
			t.Fatalf("answered %d %.200s, want the handler's 422", w.Code, w.Body.String())
		}
		for range 2 {
			w := call()
			wantNotKept(t, w.Code, w.Header(), w.Body.Bytes(), 422, len(body))
		}
		if runs != 1 {
			t.Fatalf("handler ran %d times, want once", runs)
		}
	})
	t.Run("outside Lambda", func(t *testing.T) {
		e := newEnv(t, nil)
		takeOrderOne(t, e)
		h := &handler{before: before}
		ev := v2event("POST", "POST /orders", testKey, `{}`)
		for i := range 2 {
			if r := e.call(h, ev); r.StatusCode != 422 || r.Body != body || (i == 1) != (r.Headers[idem.HeaderOpenWOPReplay] == "true") {
				t.Fatalf("call %d: %d, %d bytes; want the answer, then its replay", i+1, r.StatusCode, len(r.Body))
			}
		}
		if h.Calls() != 1 {
			t.Fatalf("handler ran %d times, want once", h.Calls())
		}
	})
}

// TestConflictAnswerCarriesNoHandlerCookies: the cookies of a handler's
// answer (Cookies, HTTP API) go out with that answer only. When its
// writes fail their condition at completion and the handler's answer to
// the conflict (OnConflict) is sent instead, or the cancelled completion
// is a 500, nothing the handler wrote committed, so the cookies it set
// for them (a session, a cart) are not sent either. The handler's own
// answer still carries them.
func TestConflictAnswerCarriesNoHandlerCookies(t *testing.T) {
	final := &idem.Response{Status: 422, Headers: map[string][]string{"Content-Type": {"application/json"}},
		Body: []byte(`{"error":"unprocessable","message":"taken"}`)}
	for _, tc := range []struct {
		name     string
		conflict bool
		answer   *idem.Response
		status   int
	}{
		{"handler's own answer", false, nil, 201},
		{"conflict answered", true, final, 422},
		{"conflict unanswered", true, nil, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			takeOrderOne(t, e)
			key := "order-2"
			if tc.conflict {
				key = "order-1"
			}
			h := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				_ = idem.TransactOr(ctx, func(context.Context, int) error { return errTaken },
					memstore.Write{Key: key, Value: []byte("second"), IfAbsent: true})
				_ = idem.OnConflict(ctx, func(error) *idem.Response { return tc.answer })
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{}`, Cookies: []string{"cart=c1; Path=/; HttpOnly"}}, nil
			}
			r, err := e.guard.HTTPAPI(h)(context.Background(), v2event("POST", "POST /orders", testKey, `{}`))
			if err != nil || r.StatusCode != tc.status {
				t.Fatalf("answered %d %v, want %d", r.StatusCode, err, tc.status)
			}
			if own := tc.status == 201; (len(r.Cookies) > 0) != own {
				t.Fatalf("cookies %q with a %d, want the handler's exactly on its own answer", r.Cookies, r.StatusCode)
			}
		})
	}
}
