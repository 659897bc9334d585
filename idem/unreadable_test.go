package idem_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// wantUnreadable asserts that status and body are the answer to the
// request whose handler answered something the Guard cannot read: 500
// internal_error in the envelope, saying the request is not run again
// (never the invitation to retry it with the same key).
func wantUnreadable(t *testing.T, status int, body string) {
	t.Helper()
	var env struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("first: body is not the envelope: %v: %.200s", err, body)
	}
	if status != 500 || env.Error != "internal_error" || !strings.Contains(env.Message, "not run again") {
		t.Fatalf("first: %d %+v; want 500 internal_error saying the request is not run again", status, env)
	}
}

// headerOf is a map of one-value headers (an API Gateway answer's) as an
// http.Header.
func headerOf(h map[string]string) http.Header {
	out := http.Header{}
	for k, v := range h {
		out.Set(k, v)
	}
	return out
}

// TestUnreadableAnswerRunsOnce: a handler that ran to the end but
// answered something the Guard cannot turn into a response (an API
// Gateway answer with StatusCode 0, one whose IsBase64Encoded body is not
// base64, a net/http status outside 100..599) did its work: it is
// recorded as run with its response not kept, as a response too large to
// keep is. Its caller gets 500 internal_error saying the request is not
// run again, every duplicate 410 idemkit.response_not_kept with the
// handler's status (0 when it had none the Guard answers) and the body's
// size, and the handler never runs again. Released, as a handler error
// is, every retry ran the handler again: its side effects twice.
func TestUnreadableAnswerRunsOnce(t *testing.T) {
	const notB64 = "not base64!"
	// answer is one adapter's call: status, headers and body as answered.
	type answer func() (int, http.Header, string)
	v2 := func(status int, body string, b64 bool) func(*env, *atomic.Int32) answer {
		return func(e *env, runs *atomic.Int32) answer {
			h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.Add(1)
				return events.APIGatewayV2HTTPResponse{StatusCode: status, Body: body, IsBase64Encoded: b64}, nil
			})
			return func() (int, http.Header, string) {
				r, err := h(context.Background(), v2event("POST", "POST /runs", testKey, `{"a":1}`))
				if err != nil {
					t.Fatal(err)
				}
				return r.StatusCode, headerOf(r.Headers), r.Body
			}
		}
	}
	for _, c := range []struct {
		name       string
		handler    func(*env, *atomic.Int32) answer
		wantStatus int // details.status of the duplicates
		wantSize   int // details.size; 0: positive
	}{
		{"HTTPAPI status 0", v2(0, `{"id":"r-1"}`, false), 0, len(`{"id":"r-1"}`)},
		{"HTTPAPI status 0, empty body", v2(0, "", false), 0, 0},
		{"HTTPAPI body not base64", v2(201, notB64, true), 201, len(notB64)},
		{"HTTPAPI 4xx, body not base64", v2(422, notB64, true), 422, len(notB64)},
		{"HTTPAPI status 700, body not base64", v2(700, notB64, true), 0, len(notB64)},
		{"REST status 0", func(e *env, runs *atomic.Int32) answer {
			h := e.guard.REST(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				runs.Add(1)
				return events.APIGatewayProxyResponse{StatusCode: 0, Body: "done"}, nil
			})
			return func() (int, http.Header, string) {
				r, _ := h(context.Background(), v1ev(testKey))
				return r.StatusCode, headerOf(r.Headers), r.Body
			}
		}, 0, len("done")},
		{"REST body not base64", func(e *env, runs *atomic.Int32) answer {
			h := e.guard.REST(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				runs.Add(1)
				return events.APIGatewayProxyResponse{StatusCode: 200, Body: notB64, IsBase64Encoded: true,
					MultiValueHeaders: map[string][]string{"Content-Type": {"image/png"}}}, nil
			})
			return func() (int, http.Header, string) {
				r, _ := h(context.Background(), v1ev(testKey))
				return r.StatusCode, headerOf(r.Headers), r.Body
			}
		}, 200, len(notB64)},
		{"Do status 0", func(e *env, runs *atomic.Int32) answer {
			return func() (int, http.Header, string) {
				r, _ := e.guard.Do(context.Background(), idem.Request{Event: v2event("POST", "POST /runs", testKey, `{"a":1}`)},
					func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
						runs.Add(1)
						return events.APIGatewayV2HTTPResponse{Body: "ok"}, nil
					})
				return r.StatusCode, headerOf(r.Headers), r.Body
			}
		}, 0, len("ok")},
		{"net/http status 700", func(e *env, runs *atomic.Int32) answer {
			h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.WriteHeader(700)
				_, _ = w.Write([]byte("seven hundred"))
			}))
			return func() (int, http.Header, string) {
				r := post(h, "/runs", testKey, `{"a":1}`)
				return r.Code, r.Header(), r.Body.String()
			}
		}, 0, len("seven hundred")},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) {
				cfg.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
			})
			var runs atomic.Int32
			call := c.handler(e, &runs)
			st, _, body := call()
			wantUnreadable(t, st, body)
			for i := range 2 {
				st, hdr, body := call()
				size := c.wantSize
				if size == 0 {
					// An empty body: the size of its stored form, positive.
					var env struct{ Details map[string]any }
					_ = json.Unmarshal([]byte(body), &env)
					if n, _ := env.Details["size"].(float64); n > 0 {
						size = int(n)
					}
				}
				wantNotKept(t, st, hdr, []byte(body), c.wantStatus, size)
				if hdr.Get(idem.HeaderOpenWOPReplay) != "true" {
					t.Errorf("duplicate %d: no replay marker", i+1)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times for one key, want once", n)
			}
		})
	}
}

// TestUnreadableAnswerOfARetryStatus: an unreadable body whose status the
// policy never keeps (a 5xx, a 429 under the OpenWOP default) is what a
// readable one of that status is: released, and a retry runs the handler
// again, as its status asked.
func TestUnreadableAnswerOfARetryStatus(t *testing.T) {
	e := newEnv(t, nil)
	var runs atomic.Int32
	h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{StatusCode: 503, Body: "%%%", IsBase64Encoded: true}, nil
	})
	for i := range 2 {
		r, _ := h(context.Background(), v2event("POST", "POST /runs", testKey, `{"a":1}`))
		if r.StatusCode != 500 || !strings.Contains(r.Body, "internal_error") {
			t.Fatalf("call %d: %d %s, want 500 internal_error", i+1, r.StatusCode, r.Body)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want twice (a 503 is never kept)", n)
	}
}

// TestUnreadableAnswerCarriesNoCookies: the 500 the Guard gives for an
// answer it cannot read is its own answer, not the handler's: the
// handler's cookies (set on an answer that never reaches the caller) are
// not passed on with it, as they are with the handler's own first answer.
func TestUnreadableAnswerCarriesNoCookies(t *testing.T) {
	for _, c := range []struct {
		name string
		out  events.APIGatewayV2HTTPResponse
	}{
		{"status 0", events.APIGatewayV2HTTPResponse{Cookies: []string{"s=1"}}},
		{"body not base64", events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "not base64!", IsBase64Encoded: true, Cookies: []string{"s=1"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			h := e.guard.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return c.out, nil
			})
			r, err := h(context.Background(), v2event("POST", "POST /runs", testKey, `{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			wantUnreadable(t, r.StatusCode, r.Body)
			if len(r.Cookies) != 0 {
				t.Fatalf("the Guard's 500 carries the handler's cookies %q", r.Cookies)
			}
		})
	}
	// The handler's own first answer still carries them.
	e := newEnv(t, nil)
	h := e.guard.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{}`, Cookies: []string{"s=1"}}, nil
	})
	r, err := h(context.Background(), v2event("POST", "POST /runs", testKey, `{"a":1}`))
	if err != nil || r.StatusCode != 201 || len(r.Cookies) != 1 || r.Cookies[0] != "s=1" {
		t.Fatalf("first answer: %d %q %v", r.StatusCode, r.Cookies, err)
	}
}
