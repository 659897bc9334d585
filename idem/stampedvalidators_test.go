package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestStampedReplayDropsTheFirstBodysValidators: under the ERP policy a
// replay's body carries the retry's request id (Policy.RequestIDMember),
// so it is not the bytes the handler described: a strong ETag is
// answered weak, and no digest of the first body (Content-Digest,
// Repr-Digest, Digest, Content-MD5) nor its Content-Length goes with it,
// through HTTPAPI and net/http alike; the first answer, whose body the
// stamp left as the handler wrote it, keeps them. Before the fix the
// replay carried the first body's strong ETag and digests.
func TestStampedReplayDropsTheFirstBodysValidators(t *testing.T) {
	digests := []string{"Content-Digest", "Repr-Digest", "Digest", "Content-Md5"}
	body := func(id string) string { return fmt.Sprintf(`{"request_id":%q,"ok":true}`, id) }
	check := func(t *testing.T, what string, h http.Header, stamped bool, n int) {
		t.Helper()
		etag, wantEtag := h.Get("ETag"), `"v1"`
		if stamped {
			wantEtag = `W/"v1"`
		}
		if etag != wantEtag {
			t.Errorf("%s: ETag %q, want %q", what, etag, wantEtag)
		}
		for _, d := range digests {
			if v := h.Values(d); stamped == (len(v) > 0) {
				t.Errorf("%s: %s %q (stamped body: %t)", what, d, v, stamped)
			}
		}
		if cl := h.Get("Content-Length"); cl != "" && cl != strconv.Itoa(n) {
			t.Errorf("%s: Content-Length %q for %d bytes", what, cl, n)
		}
	}
	t.Run("HTTPAPI", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Policy = erp.Policy })
		runs := 0
		w := e.guard.HTTPAPI(func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			b := body(ev.RequestContext.RequestID)
			hs := map[string]string{"Content-Type": "application/json", "ETag": `"v1"`, "Content-Length": strconv.Itoa(len(b))}
			for _, d := range digests {
				hs[d] = "sha-256=:AAAA:"
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: hs, Body: b}, nil
		})
		key := "K-stamped-validators-01"
		for i := range 2 {
			ev := v2event("POST", "POST /runs", key, `{"a":1}`)
			r, err := w(context.Background(), ev)
			if err != nil || r.StatusCode != 201 || runs != 1 || r.Body != body(ev.RequestContext.RequestID) {
				t.Fatalf("answer %d: %d %s, %v (runs %d)", i+1, r.StatusCode, r.Body, err, runs)
			}
			h := http.Header{}
			for k, v := range r.Headers {
				h.Set(k, v)
			}
			check(t, fmt.Sprintf("answer %d", i+1), h, i == 1, len(r.Body))
		}
	})
	t.Run("net/http", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) {
			c.Policy = erp.Policy
			c.Tenant = idem.SingleTenant("t")
		})
		runs := 0
		h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs++
			b := body(r.Header.Get("X-Request-Id"))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", `"v1"`)
			for _, d := range digests {
				w.Header().Set(d, "sha-256=:AAAA:")
			}
			w.WriteHeader(201)
			_, _ = w.Write([]byte(b))
		}))
		for i := range 2 {
			id := fmt.Sprintf("req-stamped-%d", i)
			req := httptest.NewRequest("POST", "/runs", strings.NewReader(`{"a":1}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "K-stamped-validators-02")
			req.Header.Set("X-Request-Id", id)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 201 || runs != 1 || rec.Body.String() != body(id) {
				t.Fatalf("answer %d: %d %s (runs %d)", i+1, rec.Code, rec.Body, runs)
			}
			check(t, fmt.Sprintf("answer %d", i+1), rec.Header(), i == 1, rec.Body.Len())
		}
	})
}
