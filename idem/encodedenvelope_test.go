package idem_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// encodeBody returns body under the content coding coding (gzip, deflate
// as RFC 9110 defines it: zlib, or the raw deflate some servers send).
func encodeBody(t *testing.T, coding string, body string) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&b)
	case "deflate":
		w = zlib.NewWriter(&b)
	case "raw-deflate":
		w, _ = flate.NewWriter(&b, flate.DefaultCompression)
	default:
		t.Fatalf("coding %q", coding)
	}
	if _, err := io.WriteString(w, body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestEncodedErrorEnvelopeIsNotCached: a handler answer whose body is
// sent with a content coding (a compression middleware inside the Guard:
// Content-Encoding gzip or deflate) is classified by its decoded envelope,
// as the same answer sent plain is. Read as it was, its code was "" and
// every answer the policy forgets by code (400 validation_error and
// idempotency_key_invalid, 409 run_already_active, 422
// residency_unavailable; the commerce policy's retryable 503
// idemkit.store_unavailable) was recorded and replayed: the corrected
// retry of a refused body was 409 idempotency_key_mismatch, and a create
// refused while another run held its scope was refused again on every
// retry for the record's retention.
func TestEncodedErrorEnvelopeIsNotCached(t *testing.T) {
	type answer struct {
		status int
		body   string
	}
	for _, coding := range []string{"gzip", "deflate", "raw-deflate"} {
		for _, c := range []struct {
			name   string
			policy idem.Policy
			first  answer
		}{
			{"validation_error", idem.PolicyOpenWOP, answer{400, `{"error":"validation_error","message":"bad"}`}},
			{"run_already_active", idem.PolicyOpenWOP, answer{409, `{"error":"run_already_active","message":"busy"}`}},
			{"residency_unavailable", idem.PolicyOpenWOP, answer{422, `{"error":"residency_unavailable","message":"no"}`}},
			{"commerce store_unavailable", commerce.Policy, answer{503, `{"error":"idemkit.store_unavailable","message":"later"}`}},
		} {
			header := coding
			if coding == "raw-deflate" {
				header = "deflate"
			}
			t.Run(coding+"/"+c.name+"/net/http", func(t *testing.T) {
				e := newEnv(t, func(cfg *idem.Config) {
					cfg.Policy = c.policy
					cfg.Tenant = idem.SingleTenant("t")
					if c.policy.Name == "commerce" {
						cfg.HTTPCredential = func(*http.Request, string) string { return "x" }
					}
				})
				var runs atomic.Int32
				h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if runs.Add(1) == 1 {
						w.Header().Set("Content-Type", "application/json")
						w.Header().Set("Content-Encoding", header)
						w.WriteHeader(c.first.status)
						_, _ = w.Write(encodeBody(t, coding, c.first.body))
						return
					}
					w.WriteHeader(201)
					_, _ = io.WriteString(w, `{"id":"r-1"}`)
				}))
				for i, want := range []int{c.first.status, 201} {
					req := httptest.NewRequest("POST", "/runs", strings.NewReader(`{"a":1}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", testKey)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != want {
						t.Fatalf("request %d: %d %q; want %d (the first answer is not kept)", i+1, w.Code, w.Body, want)
					}
				}
				if n := runs.Load(); n != 2 {
					t.Fatalf("handler ran %d times, want 2", n)
				}
			})
			t.Run(coding+"/"+c.name+"/HTTPAPI", func(t *testing.T) {
				e := newEnv(t, func(cfg *idem.Config) { cfg.Policy = c.policy })
				var runs atomic.Int32
				h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					if runs.Add(1) == 1 {
						return events.APIGatewayV2HTTPResponse{StatusCode: c.first.status,
							Headers:         map[string]string{"Content-Type": "application/json", "content-encoding": header},
							Body:            base64.StdEncoding.EncodeToString(encodeBody(t, coding, c.first.body)),
							IsBase64Encoded: true}, nil
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"r-1"}`}, nil
				})
				for i, want := range []int{c.first.status, 201} {
					r, err := h(context.Background(), commerceEvent("POST", "POST /runs", testKey, `{"a":1}`))
					if err != nil {
						t.Fatal(err)
					}
					if r.StatusCode != want {
						t.Fatalf("request %d: %d %q; want %d (the first answer is not kept)", i+1, r.StatusCode, r.Body, want)
					}
				}
				if n := runs.Load(); n != 2 {
					t.Fatalf("handler ran %d times, want 2", n)
				}
			})
		}
	}
}

// TestEncodedFinalAnswerIsReplayedAsSent: a final answer sent with a
// content coding is kept and replayed byte for byte, coding header
// included (the Guard reads the decoded envelope only to classify it).
func TestEncodedFinalAnswerIsReplayedAsSent(t *testing.T) {
	e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = idem.SingleTenant("t") })
	body := encodeBody(t, "gzip", `{"error":"not_found","message":"no such order"}`)
	var runs atomic.Int32
	h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(404)
		_, _ = w.Write(body)
	}))
	for i := 0; i < 2; i++ {
		req := httptest.NewRequest("POST", "/runs", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", testKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 404 || !bytes.Equal(w.Body.Bytes(), body) || w.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("answer %d: %d %v %q; want the 404 as sent", i+1, w.Code, w.Header(), w.Body)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}
