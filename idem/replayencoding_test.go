package idem_test

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// gzipInside is a compression middleware placed inside the Guard: it
// encodes its handler's answer with gzip when the request accepts it.
func gzipInside(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		w.WriteHeader(rec.Code)
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(rec.Body.Bytes())
		_ = zw.Close()
	})
}

// TestReplayHonoursTheRetrysAcceptEncoding: an answer recorded with a
// content coding (a compression middleware inside the Guard) is replayed
// to a retry that does not accept that coding decoded, without its
// Content-Encoding (and, under the ERP policy, with the current attempt's
// request_id stamped in the JSON body, which it could not be while the
// body was compressed); a retry that accepts it, or that sends no
// Accept-Encoding (RFC 9110: any coding is acceptable), gets it as
// recorded. The handler runs once.
func TestReplayHonoursTheRetrysAcceptEncoding(t *testing.T) {
	const plain = `{"id":"r-1","request_id":"req-1"}`
	for _, c := range []struct {
		accept string
		plain  bool
	}{
		{"identity", true},
		{"br", true},
		{"gzip;q=0, deflate", true},
		{"*;q=0", true},
		{"gzip", false},
		{"br, GZIP;q=0.5", false},
		{"*", false},
		{"", false},
	} {
		t.Run("net/http/"+c.accept, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) { cfg.Policy = erp.Policy; cfg.Tenant = idem.SingleTenant("t") })
			var runs atomic.Int32
			h := e.guard.Handle("POST /runs", gzipInside(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				_, _ = io.WriteString(w, `{"id":"r-1","request_id":"`+r.Header.Get("X-Request-Id")+`"}`)
			})))
			send := func(id, accept string) *httptest.ResponseRecorder {
				req := httptest.NewRequest("POST", "/runs", strings.NewReader(`{"a":1}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", testKey)
				req.Header.Set("X-Request-Id", id)
				if accept != "" {
					req.Header.Set("Accept-Encoding", accept)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w
			}
			if w := send("req-1", "gzip"); w.Code != 201 || w.Header().Get("Content-Encoding") != "gzip" {
				t.Fatalf("first: %d %q", w.Code, w.Header())
			}
			w := send("req-2", c.accept)
			if w.Code != 201 || w.Header().Get(erp.HeaderReplayed) != "true" || runs.Load() != 1 {
				t.Fatalf("retry: %d %q, runs %d", w.Code, w.Header(), runs.Load())
			}
			if c.plain {
				if ce := w.Header().Get("Content-Encoding"); ce != "" || w.Body.String() != `{"id":"r-1","request_id":"req-2"}` {
					t.Fatalf("retry accepting %q: Content-Encoding %q, body %q; want it decoded", c.accept, ce, w.Body)
				}
				if cl := w.Header().Get("Content-Length"); cl != "33" {
					t.Fatalf("Content-Length %q", cl)
				}
				return
			}
			if w.Header().Get("Content-Encoding") != "gzip" {
				t.Fatalf("retry accepting %q: %q, want gzip as recorded", c.accept, w.Header())
			}
			zr, err := gzip.NewReader(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(zr); string(b) != plain {
				t.Fatalf("body %q", b)
			}
		})
	}
	t.Run("HTTPAPI", func(t *testing.T) {
		r, runs, err := gzipThenIdentityV2(t, map[string]string{"Content-Type": "application/json", "content-encoding": "gzip"}, `{"id":"r-1"}`)
		if err != nil || r.StatusCode != 201 || runs != 1 {
			t.Fatalf("retry: %v %v", r, err)
		}
		body := r.Body
		if r.IsBase64Encoded {
			b, _ := base64.StdEncoding.DecodeString(r.Body)
			body = string(b)
		}
		for k := range r.Headers {
			if strings.EqualFold(k, "Content-Encoding") {
				t.Fatalf("retry accepting identity: headers %v", r.Headers)
			}
		}
		if body != `{"id":"r-1"}` {
			t.Fatalf("body %q", body)
		}
	})
}

// brotliFirst is a compression middleware inside the Guard that prefers
// a coding the Guard cannot read: br when the request accepts it (its
// bytes stand in for brotli here), else gzip when accepted, else none.
func brotliFirst(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ae := r.Header.Get("Accept-Encoding")
		if !strings.Contains(ae, "br") {
			gzipInside(next).ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Encoding", "br")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(append([]byte("BR:"), rec.Body.Bytes()...))
	})
}

// TestHandlerInsideTheGuardIsOfferedOnlyCodingsTheGuardReads: the handler
// (and a compression middleware inside the Guard) sees the request's
// Accept-Encoding without the codings the Guard cannot undo (br, zstd,
// "*"), so an answer recorded inside the Guard is in a coding it reads:
// its error code is read (a 400 validation_error is forgotten, and the
// corrected retry under the key runs, as without compression) and its
// replay is decoded for a retry that does not accept it. The Guard's own
// view of the request (its fingerprint) is unchanged. Before, the
// middleware chose br: the 400 was recorded (its code unread) and the
// corrected retry refused 409, and a 201 was replayed in br to a retry
// that accepts only gzip.
func TestHandlerInsideTheGuardIsOfferedOnlyCodingsTheGuardReads(t *testing.T) {
	e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = idem.SingleTenant("t") })
	var runs atomic.Int32
	var seen []string
	h := e.guard.Handle("POST /runs", brotliFirst(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		seen = append(seen, r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "application/json")
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"a":1}` {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":"validation_error","message":"bad"}`)
			return
		}
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"id":"r-1"}`)
	})))
	send := func(body, accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/runs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", testKey)
		req.Header.Set("Accept-Encoding", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := send(`{"a":0}`, "br, gzip;q=0.8, zstd"); w.Code != 400 {
		t.Fatalf("refused body: %d %v", w.Code, w.Header())
	}
	if w := send(`{"a":1}`, "br, gzip;q=0.8, zstd"); w.Code != 201 || w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("corrected retry: %d %v %q, want it run and answered in gzip", w.Code, w.Header(), w.Body)
	}
	w := send(`{"a":1}`, "*, br")
	if w.Code != 201 || w.Header().Get("Content-Encoding") != "gzip" || runs.Load() != 2 {
		t.Fatalf("replay: %d %v (runs %d)", w.Code, w.Header(), runs.Load())
	}
	if w := send(`{"a":1}`, "identity"); w.Body.String() != `{"id":"r-1"}` || w.Header().Get("Content-Encoding") != "" {
		t.Fatalf("replay accepting identity: %v %q", w.Header(), w.Body)
	}
	if len(seen) != 2 || seen[0] != "gzip;q=0.8" || seen[1] != "gzip;q=0.8" {
		t.Fatalf("the handler saw Accept-Encoding %q", seen)
	}
}

// TestDecodedReplayDropsTheCodedRepresentationsValidators: a replay
// decoded for a retry that does not accept the recorded coding is another
// representation than the one recorded (RFC 9110 §8.8.3): its
// Content-Length is the decoded body's, a strong ETag of the coded bytes
// is answered weak (as a gunzipping proxy weakens it), and the digests of
// the coded bytes (Content-Digest, Repr-Digest, Digest, Content-MD5) are
// not answered, never claiming bytes the retry did not get; Vary is kept.
// A retry that accepts the coding gets every header as recorded.
func TestDecodedReplayDropsTheCodedRepresentationsValidators(t *testing.T) {
	const plain = `{"id":"r-1"}`
	digests := []string{"Content-Digest", "Repr-Digest", "Digest", "Content-Md5"}
	for _, etag := range []string{`"v1-gzip"`, `W/"v1"`} {
		t.Run("net/http/"+etag, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = idem.SingleTenant("t") })
			var runs atomic.Int32
			h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				gz := encodeBody(t, "gzip", plain)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("Vary", "Accept-Encoding")
				w.Header().Set("ETag", etag)
				w.Header().Set("Content-Length", strconv.Itoa(len(gz)))
				for _, d := range digests {
					w.Header().Set(d, "sha-256=:AAAA:")
				}
				w.WriteHeader(201)
				_, _ = w.Write(gz)
			}))
			send := func(accept string) *httptest.ResponseRecorder { return postAccepting(h, accept) }
			first := send("gzip")
			w := send("identity")
			if w.Code != 201 || w.Body.String() != plain || runs.Load() != 1 {
				t.Fatalf("retry: %d %q, runs %d", w.Code, w.Body, runs.Load())
			}
			want := etag
			if !strings.HasPrefix(etag, "W/") {
				want = "W/" + etag
			}
			if got := w.Header().Get("ETag"); got != want {
				t.Errorf("ETag %q, want %q", got, want)
			}
			if got := w.Header().Get("Content-Length"); got != strconv.Itoa(len(plain)) {
				t.Errorf("Content-Length %q, want %d", got, len(plain))
			}
			if got := w.Header().Get("Vary"); got != "Accept-Encoding" {
				t.Errorf("Vary %q", got)
			}
			for _, d := range digests {
				if v := w.Header().Values(d); len(v) > 0 {
					t.Errorf("%s %q answered with the decoded body", d, v)
				}
			}
			same := send("gzip")
			if same.Header().Get("ETag") != etag || same.Header().Get("Content-Digest") == "" || same.Body.String() != first.Body.String() {
				t.Errorf("retry accepting gzip: %q", same.Header())
			}
		})
	}
	t.Run("HTTPAPI", func(t *testing.T) {
		r, _, err := gzipThenIdentityV2(t, map[string]string{"Content-Type": "application/json", "content-encoding": "gzip", "etag": `"v1-gzip"`, "content-digest": "sha-256=:AAAA:"}, plain)
		if err != nil || r.StatusCode != 201 {
			t.Fatalf("retry: %v %v", r, err)
		}
		for k, v := range r.Headers {
			switch {
			case strings.EqualFold(k, "ETag") && v != `W/"v1-gzip"`,
				strings.EqualFold(k, "Content-Digest"):
				t.Errorf("retry accepting identity: %s %q", k, v)
			}
		}
	})
}

// decodedBody is an API Gateway answer's body as the client gets it.
func decodedBody(body string, b64 bool) string {
	if !b64 {
		return body
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return "not base64: " + body
	}
	return string(b)
}

// codingHandlerAnswer is an API Gateway handler's answer compressed for
// the Accept-Encoding it sees: br when named (its bytes stand in for
// brotli), else gzip when named, else plain.
func codingHandlerAnswer(t *testing.T, accept, plain string) (body string, b64 bool, coding string) {
	switch {
	case strings.Contains(accept, "br"):
		return base64.StdEncoding.EncodeToString(append([]byte("BR:"), plain...)), true, "br"
	case strings.Contains(accept, "gzip"):
		return base64.StdEncoding.EncodeToString(encodeBody(t, "gzip", plain)), true, "gzip"
	}
	return plain, false, ""
}

// TestAPIGatewayHandlerIsOfferedOnlyCodingsTheGuardReads: as behind
// net/http (195), an HTTPAPI or REST handler sees the request's
// Accept-Encoding without the codings the Guard cannot undo (br, zstd,
// "*"), so a handler that compresses for it answers in gzip, which a
// retry accepting only identity gets decoded; before, it answered br,
// replayed as recorded to a retry that cannot read br. The Guard's own
// view of the request (its fingerprint) is the request's.
func TestAPIGatewayHandlerIsOfferedOnlyCodingsTheGuardReads(t *testing.T) {
	const plain = `{"id":"r-1"}`
	const browser = "gzip, deflate, br, zstd"
	t.Run("HTTPAPI", func(t *testing.T) {
		e := newEnv(t, nil)
		var seen []string
		h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			seen = append(seen, ev.Headers["accept-encoding"])
			body, b64, coding := codingHandlerAnswer(t, ev.Headers["accept-encoding"], plain)
			return events.APIGatewayV2HTTPResponse{StatusCode: 201,
				Headers: map[string]string{"Content-Type": "application/json", "Content-Encoding": coding}, Body: body, IsBase64Encoded: b64}, nil
		})
		ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
		ev.Headers["accept-encoding"] = browser
		if r, err := h(context.Background(), ev); err != nil || r.StatusCode != 201 {
			t.Fatalf("first: %v %v", r, err)
		}
		if ev.Headers["accept-encoding"] != browser {
			t.Fatalf("the request's event was changed: %q", ev.Headers["accept-encoding"])
		}
		ev.Headers["accept-encoding"] = "identity"
		r, err := h(context.Background(), ev)
		if err != nil || r.StatusCode != 201 || decodedBody(r.Body, r.IsBase64Encoded) != plain || len(seen) != 1 || r.Headers["Content-Encoding"] != "" {
			t.Fatalf("retry accepting identity: %d %v %q base64 %v (handler saw %q)", r.StatusCode, r.Headers, r.Body, r.IsBase64Encoded, seen)
		}
		if seen[0] != "gzip, deflate" {
			t.Fatalf("the handler saw Accept-Encoding %q", seen[0])
		}
	})
	t.Run("REST", func(t *testing.T) {
		e := newEnv(t, nil)
		var seen []string
		h := e.guard.REST(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			ae := ev.Headers["Accept-Encoding"]
			if vs := ev.MultiValueHeaders["Accept-Encoding"]; len(vs) > 0 {
				ae = strings.Join(vs, ", ")
			}
			seen = append(seen, ae)
			body, b64, coding := codingHandlerAnswer(t, ae, plain)
			return events.APIGatewayProxyResponse{StatusCode: 201,
				Headers: map[string]string{"Content-Type": "application/json", "Content-Encoding": coding}, Body: body, IsBase64Encoded: b64}, nil
		})
		ev := v1ev(testKey)
		ev.Headers["Accept-Encoding"] = browser
		ev.MultiValueHeaders = map[string][]string{"Accept-Encoding": {browser}}
		if r, err := h(context.Background(), ev); err != nil || r.StatusCode != 201 {
			t.Fatalf("first: %v %v", r, err)
		}
		if ev.Headers["Accept-Encoding"] != browser || ev.MultiValueHeaders["Accept-Encoding"][0] != browser {
			t.Fatalf("the request's event was changed: %q", ev.Headers)
		}
		ev.Headers["Accept-Encoding"] = "identity"
		ev.MultiValueHeaders["Accept-Encoding"] = []string{"identity"}
		r, err := h(context.Background(), ev)
		if err != nil || r.StatusCode != 201 || decodedBody(r.Body, r.IsBase64Encoded) != plain || len(seen) != 1 || r.Headers["Content-Encoding"] != "" {
			t.Fatalf("retry accepting identity: %d %v %q base64 %v (handler saw %q)", r.StatusCode, r.Headers, r.Body, r.IsBase64Encoded, seen)
		}
		if seen[0] != "gzip, deflate" {
			t.Fatalf("the handler saw Accept-Encoding %q", seen[0])
		}
	})
}

// gzipThenIdentityV2 sends one keyed request twice through an HTTPAPI
// handler that answers 201 with headers and plain gzip-coded: first
// accepting gzip (its answer must be 201), then accepting identity only.
// It returns the retry's answer, how many times the handler ran, and the
// retry's error.
func gzipThenIdentityV2(t *testing.T, headers map[string]string, plain string) (events.APIGatewayV2HTTPResponse, int32, error) {
	t.Helper()
	e := newEnv(t, nil)
	var runs atomic.Int32
	h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: headers,
			Body:            base64.StdEncoding.EncodeToString(encodeBody(t, "gzip", plain)),
			IsBase64Encoded: true}, nil
	})
	ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
	ev.Headers["accept-encoding"] = "gzip"
	if r, err := h(context.Background(), ev); err != nil || r.StatusCode != 201 {
		t.Fatalf("first: %v %v", r, err)
	}
	ev.Headers["accept-encoding"] = "identity"
	r, err := h(context.Background(), ev)
	return r, runs.Load(), err
}

// TestReplayOfACodedAnswerVariesByAcceptEncoding: the Guard chooses how
// to replay an answer recorded with a content coding by the retry's
// Accept-Encoding (decoded for a retry that does not accept the coding,
// as recorded for one that does), so every such replay lists
// Accept-Encoding in Vary (RFC 9110 §12.5.5), whether or not the handler
// that coded it said so: a cache never answers one retry's coding to
// another. A Vary that lists it already (in any case) or is "*" is
// answered as recorded; one listing other fields gets Accept-Encoding
// added. An answer without a coding is replayed as recorded, its Vary
// untouched. Before, a handler that coded its answer without Vary had its
// decoded and coded replays answered without one.
func TestReplayOfACodedAnswerVariesByAcceptEncoding(t *testing.T) {
	const plain = `{"id":"r-1"}`
	for _, c := range []struct {
		name  string
		coded bool
		vary  []string // recorded
		want  []string // every replay's
	}{
		{"no Vary", true, nil, []string{"Accept-Encoding"}},
		{"Vary Origin", true, []string{"Origin"}, []string{"Origin", "Accept-Encoding"}},
		{"Vary listing it", true, []string{"Origin, accept-encoding"}, []string{"Origin, accept-encoding"}},
		{"Vary *", true, []string{"*"}, []string{"*"}},
		{"uncoded", false, nil, nil},
		{"uncoded, Vary Origin", false, []string{"Origin"}, []string{"Origin"}},
	} {
		t.Run("net/http/"+c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = idem.SingleTenant("t") })
			var runs atomic.Int32
			h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header().Set("Content-Type", "application/json")
				for _, v := range c.vary {
					w.Header().Add("Vary", v)
				}
				if !c.coded {
					w.WriteHeader(201)
					_, _ = io.WriteString(w, plain)
					return
				}
				w.Header().Set("Content-Encoding", "gzip")
				w.WriteHeader(201)
				_, _ = w.Write(encodeBody(t, "gzip", plain))
			}))
			send := func(accept string) *httptest.ResponseRecorder { return postAccepting(h, accept) }
			first := send("gzip")
			if got := first.Header().Values("Vary"); !slices.Equal(got, c.vary) {
				t.Fatalf("first answer: Vary %q, want the handler's %q", got, c.vary)
			}
			for _, accept := range []string{"identity", "gzip", ""} {
				w := send(accept)
				if w.Code != 201 || w.Header().Get(idem.HeaderOpenWOPReplay) != "true" || runs.Load() != 1 {
					t.Fatalf("retry accepting %q: %d, runs %d", accept, w.Code, runs.Load())
				}
				if got := w.Header().Values("Vary"); !slices.Equal(got, c.want) {
					t.Errorf("retry accepting %q: Vary %q, want %q", accept, got, c.want)
				}
			}
		})
	}
	t.Run("HTTPAPI", func(t *testing.T) {
		r, runs, err := gzipThenIdentityV2(t, map[string]string{"Content-Type": "application/json", "content-encoding": "gzip"}, plain)
		if err != nil || r.StatusCode != 201 || runs != 1 {
			t.Fatalf("retry: %v %v, runs %d", r, err, runs)
		}
		vary := ""
		for k, v := range r.Headers {
			if strings.EqualFold(k, "Vary") {
				vary = v
			}
		}
		if vary != "Accept-Encoding" {
			t.Errorf("retry accepting identity: Vary %q, want Accept-Encoding", vary)
		}
	})
}

// TestReplayToARetryAcceptingNoCodingTheGuardHasIsUncoded: a retry whose
// Accept-Encoding accepts neither the recorded coding nor identity (br
// with identity;q=0, identity;q=0 alone, gzip;q=0 with *;q=0) is answered
// the replay uncoded, not 406: RFC 9110 §12.5.3 says that when none of
// the available codings is acceptable the origin server SHOULD answer
// without a content coding (RFC 7231 dropped RFC 2616's 406 on purpose),
// and a request that was processed is answered its outcome. A middleware
// outside the Guard may then encode it in br. The replay lists
// Accept-Encoding in Vary.
func TestReplayToARetryAcceptingNoCodingTheGuardHasIsUncoded(t *testing.T) {
	const plain = `{"id":"r-1"}`
	e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = idem.SingleTenant("t") })
	var runs atomic.Int32
	h := e.guard.Handle("POST /runs", gzipInside(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, plain)
	})))
	send := func(accept string) *httptest.ResponseRecorder { return postAccepting(h, accept) }
	if w := send("gzip"); w.Code != 201 || w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("first: %d %v", w.Code, w.Header())
	}
	for _, accept := range []string{"br, identity;q=0", "identity;q=0", "gzip;q=0, *;q=0", "br;q=1, gzip;q=0, identity;q=0"} {
		w := send(accept)
		if w.Code != 201 || w.Body.String() != plain || w.Header().Get("Content-Encoding") != "" || w.Header().Get("Vary") != "Accept-Encoding" || runs.Load() != 1 {
			t.Errorf("retry accepting %q: %d %q %v, runs %d; want the 201 replayed uncoded", accept, w.Code, w.Body, w.Header(), runs.Load())
		}
	}
}

// postAccepting sends h the JSON POST /runs {"a":1} under testKey, with
// accept as its Accept-Encoding (none when empty), and returns the answer.
func postAccepting(h http.Handler, accept string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/runs", strings.NewReader(`{"a":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", testKey)
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}
