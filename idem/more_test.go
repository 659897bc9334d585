package idem_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/idem/keyspace"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/jcs"
	"github.com/idemkit/idemkit/internal/shared"
)

func TestDigestRFC8785Reference(t *testing.T) {
	dir := shared.Path(t, "rfc8785")
	inputs, err := filepath.Glob(filepath.Join(dir, "input", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no RFC 8785 inputs in %s", dir)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, "output", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := idem.DigestJSON(raw, nil)
		if name == "values.json" {
			// 333333333.33333329 has more precision than a double: the
			// reference output writes it 333333333.3333333, a different
			// value, so Layer 1 refuses the body (the canonical form itself
			// is checked by internal/jcs TestRFC8785Reference).
			var je *jcs.Error
			if !errors.Is(err, jcs.ErrInexactNumber) || !errors.As(err, &je) {
				t.Fatalf("%s: err = %v, want ErrInexactNumber", name, err)
			}
			if ptr, _ := jcs.Pointer(raw, je.Offset); ptr != "/numbers/0" {
				t.Fatalf("%s: inexact number at %q, want /numbers/0", name, ptr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sum := sha256.Sum256(bytes.TrimRight(want, "\n"))
		if exp := canon.RecipeJCS + ":" + base64.RawURLEncoding.EncodeToString(sum[:]); got != exp {
			// output files may or may not carry a trailing newline
			sum = sha256.Sum256(want)
			if exp2 := canon.RecipeJCS + ":" + base64.RawURLEncoding.EncodeToString(sum[:]); got != exp2 {
				t.Fatalf("%s: digest %s, want %s", name, got, exp)
			}
		}
	}
}

func TestDigestGoldenCanonicalVectors(t *testing.T) {
	raw, err := os.ReadFile(shared.Path(t, "openwop", "conformance", "vectors", "semantic-request-digest-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			ID        string `json:"id"`
			Canonical string `json:"canonical"`
			Digest    string `json:"digest"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || len(f.Vectors) == 0 {
		t.Fatalf("vectors: %v", err)
	}
	for _, v := range f.Vectors {
		got, err := idem.DigestJSON([]byte(v.Canonical), nil)
		if err != nil {
			t.Fatalf("%s: %v", v.ID, err)
		}
		want, _ := hex.DecodeString(v.Digest)
		if got != canon.RecipeJCS+":"+base64.RawURLEncoding.EncodeToString(want) {
			t.Fatalf("%s: digest %s, want sha256 %s", v.ID, got, v.Digest)
		}
	}
}

func TestDigestRejectsAndNormalises(t *testing.T) {
	for body, sentinel := range map[string]error{
		`{"a":1,"a":2}`:        jcs.ErrDuplicateKey,
		`["\udc00"]`:           jcs.ErrLoneSurrogate,
		"[\"\xc3\x28\"]":       jcs.ErrInvalidUTF8,
		`{"a":1e400}`:          jcs.ErrNumber,
		`{"a":"\ud800\u0041"}`: jcs.ErrLoneSurrogate,
	} {
		_, err := idem.DigestJSON([]byte(body), nil)
		if !errors.Is(err, idem.ErrInvalidJSON) || !errors.Is(err, sentinel) {
			t.Fatalf("%q: err = %v, want ErrInvalidJSON and %v", body, err, sentinel)
		}
	}
	a, _ := idem.DigestJSON([]byte(`{"b":[1.0,2],"a":"\u00e9"}`), nil)
	b, _ := idem.DigestJSON([]byte("{ \"a\" : \"é\", \"b\" : [1, 2e0] }"), nil)
	if a != b || !strings.HasPrefix(a, canon.RecipeJCS+":") {
		t.Fatalf("semantically equal JSON hashes differ: %s %s", a, b)
	}
	if idem.DigestBytes([]byte("x")) == a || !strings.HasPrefix(idem.DigestBytes(nil), canon.RecipeBytes+":") {
		t.Fatalf("bytes recipe not stamped")
	}
	n := &canon.Normalizer{Name: "erp-v1", Exclude: []string{"request_id", "/meta/timestamp"}, Func: func(v any) (any, error) {
		m := v.(map[string]any)
		if s, ok := m["code"].(string); ok {
			m["code"] = strings.ToUpper(strings.TrimSpace(s))
		}
		return m, nil
	}}
	x, err := idem.DigestJSON([]byte(`{"code":" wo-1 ","request_id":"r1","meta":{"timestamp":1,"v":2}}`), n)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := idem.DigestJSON([]byte(`{"meta":{"v":2,"timestamp":99},"code":"WO-1","request_id":"r2"}`), n)
	z, _ := idem.DigestJSON([]byte(`{"meta":{"v":3},"code":"WO-1"}`), n)
	if x != y || x == z || !strings.HasPrefix(x, canon.RecipeJCS+"+erp-v1:") {
		t.Fatalf("normaliser: %s %s %s", x, y, z)
	}
}

// RFC 0150 §A: no caller-supplied key can name, claim or suppress a
// host-generated lock.
func TestCallerKeyspaceCannotReachHostLocks(t *testing.T) {
	hostLocks := []string{"schedule-fire:job-1:slot-7", "lock:scheduler", "effect:abc"}
	st := memstore.New()
	// A caller sending a host lock's name as its key gets a hashed,
	// prefixed ID that is never the lock name...
	for _, lock := range hostLocks {
		for _, tenant := range []string{"tenant:t", "anon:"} {
			id := keyspace.ID(tenant, "POST /runs", lock)
			if !keyspace.IsCaller(id) || strings.Contains(id, lock) {
				t.Fatalf("ScopeID(%q) = %q", lock, id)
			}
		}
		// ...and the Layer-1 store refuses any ID outside the caller keyspace,
		// so a host lock cannot be stored (or claimed, or suppressed) there.
		_, err := st.Claim(context.Background(), idem.Record{ID: lock, Digest: "d", Owner: "o", State: idem.StatePending}, newClock().Now())
		if !errors.Is(err, idem.ErrInvalidRecord) {
			t.Fatalf("store accepted host id %q: %v", lock, err)
		}
	}
	// ScopeID is injective over its parts (length-prefixed).
	if keyspace.ID("a", "bc", "d") == keyspace.ID("ab", "c", "d") {
		t.Fatalf("scope parts are ambiguous")
	}
}

func TestRESTAdapter(t *testing.T) {
	e := newEnv(t, nil)
	calls := 0
	h := func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		calls++
		return events.APIGatewayProxyResponse{StatusCode: 200, IsBase64Encoded: true, Body: base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff}),
			MultiValueHeaders: map[string][]string{"Link": {"<a>", "<b>"}}, Headers: map[string]string{"Content-Type": "application/octet-stream"}}, nil
	}
	ev := events.APIGatewayProxyRequest{
		HTTPMethod: "POST", Resource: "/runs/{runId}/cancel", Path: "/runs/r1/cancel",
		MultiValueHeaders: map[string][]string{"Idempotency-Key": {testKey}, "Content-Type": {"application/json"}},
		Body:              `{}`,
		RequestContext:    events.APIGatewayProxyRequestContext{RequestID: "r1", Authorizer: map[string]any{"tenantId": testTenant}},
	}
	w := e.guard.REST(h)
	first, _ := w(context.Background(), ev)
	ev.Path = "/runs/r2/cancel" // same resource: the path is never the operation
	second, _ := w(context.Background(), ev)
	if calls != 1 || second.Body != first.Body || !second.IsBase64Encoded || second.Headers["Openwop-Idempotent-Replay"] != "true" ||
		len(second.MultiValueHeaders["Link"]) != 2 {
		t.Fatalf("REST replay: calls=%d %+v", calls, second)
	}
	if _, ok, _ := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs/{runId}/cancel", testKey), e.clock.Now()); !ok {
		t.Fatalf("operation is not method + resource")
	}
	ev.MultiValueHeaders["Idempotency-Key"] = []string{testKey, testKey}
	if r, _ := w(context.Background(), ev); r.StatusCode != 400 {
		t.Fatalf("two key headers: %+v", r)
	}
}

func TestHTTPMiddleware(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(r *http.Request) (string, bool) { return r.Header.Get("X-Tenant"), r.Header.Get("X-Tenant") != "" }
	})
	calls := 0
	mux := http.NewServeMux()
	mux.Handle("POST /runs/{id}", e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Set-Cookie", "a=b")
		w.WriteHeader(201)
		_, _ = w.Write(append([]byte(`{"echo":`), append(b, '}')...))
	})))
	do := func(path, key, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Tenant", testTenant)
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	a := do("/runs/1", testKey, `{"x":1}`)
	// Same pattern, different path parameter: a different request.
	if other := do("/runs/2", testKey, `{"x":1}`); other.Code != 409 || calls != 1 {
		t.Fatalf("other run: %d %q (calls=%d)", other.Code, other.Body, calls)
	}
	b := do("/runs/1", testKey, `{"x":1}`)
	if calls != 1 || a.Code != 201 || b.Code != 201 || a.Body.String() != b.Body.String() ||
		b.Header().Get("OpenWOP-Idempotent-Replay") != "true" || b.Header().Get("Set-Cookie") != "" || a.Header().Get("Set-Cookie") != "a=b" {
		t.Fatalf("calls=%d a=%v %q b=%v %q", calls, a.Header(), a.Body, b.Header(), b.Body)
	}
	if _, ok, _ := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs/{id}", testKey), e.clock.Now()); !ok {
		t.Fatalf("operation is not the mux pattern")
	}
	if c := do("/runs/1", "", `{"x":1}`); c.Code != 201 || calls != 2 {
		t.Fatalf("no-key request did not stream through")
	}
	if c := do("/runs/1", testKey, `{"x":`); c.Code != 400 {
		t.Fatalf("invalid json: %d", c.Code)
	}
	// Without a pattern or HTTPOperation the middleware cannot scope.
	bare := e.guard.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Fatal("ran unscoped") }))
	r := httptest.NewRequest("POST", "/x", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", testKey)
	r.Header.Set("X-Tenant", testTenant)
	w := httptest.NewRecorder()
	bare.ServeHTTP(w, r)
	if w.Code != 500 {
		t.Fatalf("unscoped request: %d", w.Code)
	}
}

func TestMetrics(t *testing.T) {
	var buf syncBuffer
	e := newEnv(t, func(c *idem.Config) { c.Metrics = emf.New(&buf, "test") })
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	e.call(&handler{status: 503}, ev)
	e.call(&handler{}, ev)
	e.call(&handler{}, ev)
	e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{"y":1}`))
	out := buf.String()
	for _, want := range []string{
		`"Outcome":"claimed"`, `"Outcome":"reclaimed"`, `"Outcome":"replay"`, `"Outcome":"mismatch"`,
		idem.MetricClaimOutcomes,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("metrics missing %s:\n%s", want, out)
		}
	}
	// The re-run of a retryable failure is not a lease reclaim.
	if strings.Contains(out, idem.MetricReclaims) {
		t.Fatalf("a retryable failure's re-run counted as %s:\n%s", idem.MetricReclaims, out)
	}
}
