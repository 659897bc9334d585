package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// step is one scripted answer of the test server.
type step func(w http.ResponseWriter, r *http.Request)

func drop(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func status(code int, hdr ...string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"status":%d}`, code)
	}
}

func envelope(code int, errCode string, hdr ...string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":%q,"message":"scripted"}`, errCode)
	}
}

// scripted serves steps in order (the last one repeats) and records what
// every attempt carried.
type scripted struct {
	mu     sync.Mutex
	steps  []step
	n      int
	keys   []string
	bodies []string
	srv    *httptest.Server
}

func newScripted(t *testing.T, steps ...step) *scripted {
	s := &scripted{steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := min(s.n, len(s.steps)-1)
		s.n++
		s.keys = append(s.keys, strings.Join(r.Header.Values("Idempotency-Key"), ","))
		s.bodies = append(s.bodies, string(b))
		st := s.steps[i]
		s.mu.Unlock()
		st(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// fastConfig retries without real waits and records every wait asked for.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

func fastConfig(w *waits) Config {
	return Config{BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond, Sleep: w.sleep}
}

func post(t *testing.T, c *Client, url, body string) (*Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b), nil
}

func mustNew(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func sameKeys(t *testing.T, s *scripted, want string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range s.keys {
		if k != want {
			t.Fatalf("attempt %d carried key %q, want %q (keys %q)", i+1, k, want, s.keys)
		}
	}
}

func sameBodies(t *testing.T, s *scripted, want string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.bodies {
		if b != want {
			t.Fatalf("attempt %d carried body %q, want %q", i+1, b, want)
		}
	}
}

func TestDroppedConnectionsThen201(t *testing.T) {
	s := newScripted(t, drop, drop, status(201))
	var w waits
	c := mustNew(t, fastConfig(&w))
	resp, body, err := post(t, c, s.srv.URL, `{"a":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || body != `{"status":201}` {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	if resp.Attempts != 3 || s.count() != 3 {
		t.Fatalf("attempts %d, server saw %d, want 3", resp.Attempts, s.count())
	}
	if !uuidV4.MatchString(resp.Key) {
		t.Fatalf("minted key %q is not a canonical UUIDv4", resp.Key)
	}
	sameKeys(t, s, resp.Key)
	sameBodies(t, s, `{"a":1}`)
	if resp.Replayed {
		t.Fatal("fresh 201 reported as replay")
	}
	if got := w.all(); len(got) != 2 {
		t.Fatalf("waits %v, want 2", got)
	}
}

func Test503Then201(t *testing.T) {
	s := newScripted(t, status(503), status(503), status(201, "OpenWOP-Idempotent-Replay", "true"))
	var w waits
	c := mustNew(t, fastConfig(&w))
	resp, _, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Attempts != 3 || !resp.Replayed {
		t.Fatalf("got %d attempts=%d replayed=%v", resp.StatusCode, resp.Attempts, resp.Replayed)
	}
	sameKeys(t, s, resp.Key)
	// Exponential backoff with equal jitter: the n-th wait is in
	// [d/2, d) with d = min(MaxDelay, BaseDelay*2^(n-1)).
	for i, d := range w.all() {
		hi := min(80*time.Millisecond, 10*time.Millisecond<<i)
		if d < hi/2 || d >= hi {
			t.Fatalf("wait %d = %v, want in [%v, %v)", i+1, d, hi/2, hi)
		}
	}
}

func Test429Retried(t *testing.T) {
	s := newScripted(t, envelope(429, "rate_limited", "Retry-After", "0"), status(201))
	var w waits
	c := mustNew(t, fastConfig(&w))
	resp, _, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Attempts != 2 {
		t.Fatalf("got %d after %d", resp.StatusCode, resp.Attempts)
	}
}

func TestInFlight409HonoursRetryAfter(t *testing.T) {
	s := newScripted(t,
		envelope(409, "idempotency_in_flight", "Retry-After", "2"),
		envelope(409, "idempotency_in_flight", "Retry-After", "3"),
		status(201, "OpenWOP-Idempotent-Replay", "true"))
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxElapsed = time.Minute
	c := mustNew(t, cfg)
	resp, _, err := post(t, c, s.srv.URL, `{"x":"y"}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Attempts != 3 || !resp.Replayed {
		t.Fatalf("got %d attempts=%d replayed=%v", resp.StatusCode, resp.Attempts, resp.Replayed)
	}
	got := w.all()
	if len(got) != 2 {
		t.Fatalf("waits %v", got)
	}
	// Retry-After is a floor; jitter adds at most min(BaseDelay, ra/10).
	for i, ra := range []time.Duration{2 * time.Second, 3 * time.Second} {
		if got[i] < ra || got[i] > ra+10*time.Millisecond {
			t.Fatalf("wait %d = %v, want in [%v, %v]", i+1, got[i], ra, ra+10*time.Millisecond)
		}
	}
	sameKeys(t, s, resp.Key)
	sameBodies(t, s, `{"x":"y"}`)
}

func TestInFlightHTTPDateRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newScripted(t,
		envelope(409, "IDEMPOTENCY_REQUEST_IN_PROGRESS", "Retry-After", now.Add(4*time.Second).Format(http.TimeFormat)),
		status(200))
	var w waits
	cfg := fastConfig(&w)
	cfg.Now = func() time.Time { return now }
	c := mustNew(t, cfg)
	resp, _, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Attempts != 2 {
		t.Fatalf("got %d after %d", resp.StatusCode, resp.Attempts)
	}
	if got := w.all(); got[0] < 4*time.Second {
		t.Fatalf("wait %v shorter than Retry-After 4s", got[0])
	}
}

func TestNeverRetried(t *testing.T) {
	cases := map[string]step{
		"mismatch":        envelope(409, "idempotency_key_mismatch"),
		"other 409":       envelope(409, "run_terminal"),
		"409 no body":     func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(409) },
		"409 text":        func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(409); io.WriteString(w, "busy") },
		"key invalid":     envelope(400, "idempotency_key_invalid"),
		"validation":      envelope(400, "validation_error"),
		"unauthenticated": envelope(401, "unauthenticated"),
		"forbidden":       envelope(403, "forbidden"),
		"not found":       envelope(404, "not_found"),
		"422":             envelope(422, "unprocessable", "Retry-After", "1"),
		// The key's answer was not kept (idemkit's Guard): a retry under
		// the key meets it again, and it never runs twice.
		"response not kept": envelope(410, "idemkit.response_not_kept"),
		// Mismatches in the ERP and commerce policies' spellings, and a
		// 422 an API outside OpenWOP answers a reused key with.
		"ERP mismatch":      envelope(409, "IDEMPOTENCY_KEY_CONFLICT"),
		"commerce mismatch": envelope(409, "idempotency-mismatch"),
		"422 key reused":    envelope(422, "idempotency_key_reused", "Retry-After", "1"),
	}
	for name, st := range cases {
		t.Run(name, func(t *testing.T) {
			s := newScripted(t, st, status(201))
			var w waits
			c := mustNew(t, fastConfig(&w))
			resp, body, err := post(t, c, s.srv.URL, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == 201 || resp.Attempts != 1 || s.count() != 1 || len(w.all()) != 0 {
				t.Fatalf("retried: status %d attempts %d server %d waits %v", resp.StatusCode, resp.Attempts, s.count(), w.all())
			}
			// The peeked 409 body is still readable whole.
			if name == "mismatch" && ErrorCode([]byte(body)) != "idempotency_key_mismatch" {
				t.Fatalf("body %q", body)
			}
			if name == "409 text" && body != "busy" {
				t.Fatalf("body %q", body)
			}
		})
	}
}

func TestMaxAttemptsBound(t *testing.T) {
	s := newScripted(t, status(503))
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxAttempts = 4
	c := mustNew(t, cfg)
	resp, body, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	// The last answer is returned as is, readable.
	if resp.StatusCode != 503 || body != `{"status":503}` || resp.Attempts != 4 || s.count() != 4 {
		t.Fatalf("status %d body %q attempts %d server %d", resp.StatusCode, body, resp.Attempts, s.count())
	}
}

func TestMaxAttemptsTransportErrors(t *testing.T) {
	s := newScripted(t, drop)
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxAttempts = 3
	c := mustNew(t, cfg)
	_, _, err := post(t, c, s.srv.URL, `{}`)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want *client.Error", err, err)
	}
	if ce.Attempts != 3 || s.count() != 3 || !uuidV4.MatchString(ce.Key) {
		t.Fatalf("attempts %d server %d key %q", ce.Attempts, s.count(), ce.Key)
	}
	sameKeys(t, s, ce.Key)
}

func TestRetryAfterBeyondBudgetEndsCall(t *testing.T) {
	s := newScripted(t, envelope(409, "idempotency_in_flight", "Retry-After", "120"), status(201))
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxElapsed = 10 * time.Second
	c := mustNew(t, cfg)
	resp, _, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 409 || resp.Attempts != 1 || len(w.all()) != 0 {
		t.Fatalf("status %d attempts %d waits %v", resp.StatusCode, resp.Attempts, w.all())
	}
	if resp.Header.Get("Retry-After") != "120" {
		t.Fatal("Retry-After not passed to the caller")
	}
}

// A Retry-After that would end past the context's deadline (30 min, the
// deadline 10 min away, the budget an hour) is not waited for. The
// deadline is far enough that no loaded machine reaches it during the
// first attempt (at 2 s one could, failing the call instead).
func TestContextDeadlineBoundsWaits(t *testing.T) {
	s := newScripted(t, status(503, "Retry-After", "1800"), status(201))
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxElapsed = time.Hour
	c := mustNew(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Attempts != 1 || len(w.all()) != 0 {
		t.Fatalf("status %d attempts %d waits %v: waited past the context deadline", resp.StatusCode, resp.Attempts, w.all())
	}
}

func TestContextCancelledDuringWait(t *testing.T) {
	s := newScripted(t, status(503))
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{BaseDelay: time.Hour, MaxDelay: time.Hour, MaxElapsed: 10 * time.Hour,
		Sleep: func(c context.Context, d time.Duration) error { cancel(); <-c.Done(); return c.Err() }}
	c := mustNew(t, cfg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader("{}"))
	_, err := c.Do(req)
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) || ce.Attempts != 1 {
		t.Fatalf("err %v", err)
	}
}

func TestMaxElapsedCancelsHungAttempt(t *testing.T) {
	srv := hungServer(t)
	c := mustNew(t, Config{MaxElapsed: 100 * time.Millisecond})
	start := time.Now()
	_, _, err := post(t, c, srv.URL, `{}`)
	if !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("err %v, want ErrBudgetExhausted", err)
	}
	if el := time.Since(start); el > 2*time.Minute { // a hang guard, not a speed limit
		t.Fatalf("call took %v", el)
	}
}

func TestCallerKeys(t *testing.T) {
	t.Run("WithKey", func(t *testing.T) {
		s := newScripted(t, status(503), status(201))
		var w waits
		c := mustNew(t, fastConfig(&w))
		key := DeriveKey("checkout", "cart_8813")
		req, _ := http.NewRequestWithContext(WithKey(context.Background(), key), http.MethodPost, s.srv.URL, strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Key != key {
			t.Fatalf("key %q, want %q", resp.Key, key)
		}
		sameKeys(t, s, key)
	})
	t.Run("header wins", func(t *testing.T) {
		s := newScripted(t, status(201))
		c := mustNew(t, Config{})
		req, _ := http.NewRequestWithContext(WithKey(context.Background(), "ctx-key-0123456789abcdef"), http.MethodPost, s.srv.URL, strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "hdr-key-0123456789abcdefg")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		sameKeys(t, s, "hdr-key-0123456789abcdefg")
		if req.Header.Get("Idempotency-Key") != "hdr-key-0123456789abcdefg" {
			t.Fatal("caller's request modified")
		}
	})
	t.Run("fresh key per logical call", func(t *testing.T) {
		s := newScripted(t, status(201))
		c := mustNew(t, Config{NewKey: NewCompactKey})
		seen := map[string]bool{}
		for range 3 {
			resp, _, err := post(t, c, s.srv.URL, "{}")
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Key) != 22 || seen[resp.Key] {
				t.Fatalf("key %q", resp.Key)
			}
			seen[resp.Key] = true
		}
	})
}

// nonReplayable hides the body type so that http.NewRequest sets no GetBody.
type nonReplayable struct{ io.Reader }

func TestBodyReplayableWithoutGetBody(t *testing.T) {
	var lengths []int64
	var mu sync.Mutex
	record := func(next step) step {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			lengths = append(lengths, r.ContentLength)
			mu.Unlock()
			next(w, r)
		}
	}
	s := newScripted(t, record(drop), record(status(500)), record(status(201)))
	var w waits
	c := mustNew(t, fastConfig(&w))
	body := strings.Repeat("payload-", 10000)
	req, _ := http.NewRequest(http.MethodPut, s.srv.URL, nonReplayable{strings.NewReader(body)})
	if req.GetBody != nil {
		t.Fatal("test wants a request without GetBody")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Attempts != 3 {
		t.Fatalf("status %d attempts %d", resp.StatusCode, resp.Attempts)
	}
	sameBodies(t, s, body)
	sameKeys(t, s, resp.Key)
	for _, l := range lengths {
		if l != int64(len(body)) {
			t.Fatalf("Content-Length %v, want %d on every attempt", lengths, len(body))
		}
	}
}

func TestNonMutatingPassesThrough(t *testing.T) {
	s := newScripted(t, status(503), status(200))
	c := mustNew(t, Config{})
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		req, _ := http.NewRequest(m, s.srv.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Attempts != 1 || resp.Key != "" {
			t.Fatalf("%s: attempts %d key %q", m, resp.Attempts, resp.Key)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n != 3 || s.keys[0] != "" {
		t.Fatalf("server saw %d requests, keys %q", s.n, s.keys)
	}
}

func TestPlainHTTPClientWithResult(t *testing.T) {
	s := newScripted(t, status(502), status(201, "Idempotency-Replayed", "true"))
	var w waits
	hc := &http.Client{Transport: &Transport{Config: fastConfig(&w)}}
	var r Result
	req, _ := http.NewRequestWithContext(WithResult(context.Background(), &r), http.MethodPost, s.srv.URL, bytes.NewReader([]byte("{}")))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r.Attempts != 2 || !r.Replayed || r.Key == "" {
		t.Fatalf("result %+v", r)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{{MaxAttempts: -1}, {MaxElapsed: -1}, {BaseDelay: -1}, {MaxDelay: -1}, {BaseDelay: time.Second, MaxDelay: time.Millisecond}} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Fatalf("%+v: err %v", cfg, err)
		}
	}
	// A zero Transport is usable and validates on use.
	tr := &Transport{Config: Config{MaxAttempts: -3}}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", strings.NewReader("{}"))
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrConfig) {
		t.Fatalf("err %v", err)
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {"2", 2 * time.Second, true}, {" 0 ", 0, true}, {"-1", 0, false},
		{"1.5", 0, false}, {"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"99999999999999999999", time.Duration(int64(1<<63-1)/int64(time.Second)) * time.Second, true},
		{"9999999999999", time.Duration(int64(1<<63-1)/int64(time.Second)) * time.Second, true},
		{"+5", 0, false}, {"5s", 0, false}, {"0x10", 0, false},
	} {
		d, ok := RetryAfter(tc.in, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tc.in, d, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		c := Config{BaseDelay: 100 * time.Millisecond, MaxDelay: 3 * time.Second, Rand: func() float64 { return r }}.withDefaults()
		for n := 1; n <= 100; n++ {
			d := backoff(&c, n, 0, false)
			hi := c.MaxDelay
			if n < 20 {
				hi = min(hi, c.BaseDelay<<(n-1))
			}
			if d < hi/2 || d >= hi {
				t.Fatalf("r=%v n=%d: %v not in [%v, %v)", r, n, d, hi/2, hi)
			}
		}
	}
}

func TestErrorCode(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":"idempotency_in_flight","message":"m"}`: "idempotency_in_flight",
		`{"code":"IDEMPOTENCY_REQUEST_IN_PROGRESS"}`:      "IDEMPOTENCY_REQUEST_IN_PROGRESS",
		`{"error":{"code":"IDEMPOTENCY_KEY_CONFLICT"}}`:   "IDEMPOTENCY_KEY_CONFLICT",
		`not json`:        "",
		`{"error":42}`:    "",
		`{"message":"x"}`: "",
	} {
		if got := ErrorCode([]byte(body)); got != want {
			t.Errorf("ErrorCode(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestKeys(t *testing.T) {
	openwop := regexp.MustCompile(`^[A-Za-z0-9._~-]{22,128}$`)
	erpGrammar := regexp.MustCompile(`^[A-Za-z0-9._:-]{8,128}$`)
	seen := map[string]bool{}
	for range 1000 {
		for _, k := range []string{NewKey(), NewCompactKey()} {
			if !openwop.MatchString(k) || !erpGrammar.MatchString(k) || seen[k] {
				t.Fatalf("key %q", k)
			}
			seen[k] = true
		}
	}
	if !uuidV4.MatchString(NewKey()) {
		t.Fatal("NewKey is not a canonical UUIDv4")
	}
	a, b := DeriveKey("checkout", "cart_1"), DeriveKey("checkout", "cart_1")
	if a != b || len(a) != 43 || !openwop.MatchString(a) || !erpGrammar.MatchString(a) {
		t.Fatalf("DeriveKey %q %q", a, b)
	}
	if DeriveKey("checkout", "cart_1") == DeriveKey("checkout", "cart_2") ||
		DeriveKey("a", "bc") == DeriveKey("ab", "c") || DeriveKey("checkout") == DeriveKey("checkout", "") {
		t.Fatal("DeriveKey collides")
	}
}

// idemServer is a minimal Layer-1 server: it claims a key, runs the
// operation (creating a run), caches the final answer and replays it; a
// concurrent duplicate gets 409 idempotency_in_flight with Retry-After.
// dropAfterRun makes the first execution drop the connection after the run
// is created: the client cannot tell whether it happened.
type idemServer struct {
	mu           sync.Mutex
	runs         int
	records      map[string]*record
	dropAfterRun int
	hold         chan struct{}
}

type record struct {
	body    string
	done    bool
	payload []byte
}

func (s *idemServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	rec, ok := s.records[key]
	switch {
	case ok && rec.body != string(body):
		s.mu.Unlock()
		envelope(409, "idempotency_key_mismatch")(w, r)
		return
	case ok && !rec.done:
		s.mu.Unlock()
		envelope(409, "idempotency_in_flight", "Retry-After", "1")(w, r)
		return
	case ok:
		s.mu.Unlock()
		w.Header().Set("OpenWOP-Idempotent-Replay", "true")
		w.WriteHeader(201)
		w.Write(rec.payload)
		return
	}
	rec = &record{body: string(body)}
	s.records[key] = rec
	s.mu.Unlock()
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	s.runs++
	payload, _ := json.Marshal(map[string]any{"runId": fmt.Sprintf("run-%d", s.runs)})
	rec.payload, rec.done = payload, true
	dropIt := s.dropAfterRun > 0
	if dropIt {
		s.dropAfterRun--
	}
	s.mu.Unlock()
	if dropIt {
		drop(w, r)
		return
	}
	w.WriteHeader(201)
	w.Write(payload)
}

func TestExactlyOnceAcrossLostResponse(t *testing.T) {
	is := &idemServer{records: map[string]*record{}, dropAfterRun: 1}
	srv := httptest.NewServer(is)
	defer srv.Close()
	var w waits
	c := mustNew(t, fastConfig(&w))
	resp, body, err := post(t, c, srv.URL, `{"workflowId":"w"}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Attempts != 2 || !resp.Replayed || body != `{"runId":"run-1"}` {
		t.Fatalf("status %d attempts %d replayed %v body %s", resp.StatusCode, resp.Attempts, resp.Replayed, body)
	}
	if is.runs != 1 {
		t.Fatalf("%d runs, want 1", is.runs)
	}
}

func TestParallelDuplicatesOfOneBusinessEvent(t *testing.T) {
	is := &idemServer{records: map[string]*record{}, hold: make(chan struct{})}
	srv := httptest.NewServer(is)
	defer srv.Close()
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxAttempts = 1000 // the fake Sleep returns at once: bound by attempts, not time
	c := mustNew(t, cfg)
	key := DeriveKey("checkout", "cart_42")
	const n = 8
	var wg sync.WaitGroup
	bodies := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(WithKey(context.Background(), key), http.MethodPost, srv.URL, strings.NewReader(`{"cart":"42"}`))
			resp, err := c.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			bodies[i] = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}()
	}
	// Let the duplicates see the claim in flight before the winner finishes.
	for len(w.all()) < n-1 {
		time.Sleep(time.Millisecond)
	}
	close(is.hold)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || bodies[i] != `201 {"runId":"run-1"}` {
			t.Fatalf("caller %d: %v %q", i, errs[i], bodies[i])
		}
	}
	if is.runs != 1 {
		t.Fatalf("%d runs, want 1", is.runs)
	}
}

func TestConcurrentLogicalCallsShareTransport(t *testing.T) {
	is := &idemServer{records: map[string]*record{}}
	srv := httptest.NewServer(is)
	defer srv.Close()
	c := mustNew(t, Config{})
	var wg sync.WaitGroup
	keys := make(chan string, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _, err := post(t, c, srv.URL, `{}`)
			if err != nil || resp.StatusCode != 201 || resp.Replayed {
				t.Errorf("err %v resp %+v", err, resp)
				return
			}
			keys <- resp.Key
		}()
	}
	wg.Wait()
	close(keys)
	seen := map[string]bool{}
	for k := range keys {
		if seen[k] {
			t.Fatalf("key %q reused across logical calls", k)
		}
		seen[k] = true
	}
	if is.runs != 16 {
		t.Fatalf("%d runs, want 16", is.runs)
	}
}
