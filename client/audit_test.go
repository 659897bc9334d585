package client

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// bitsVarying returns, for a set of decoded keys of n bytes, the bit
// positions that took both values across the set.
func bitsVarying(t *testing.T, keys [][]byte, n int) (varying []bool) {
	t.Helper()
	ones := make([]int, n*8)
	for _, k := range keys {
		if len(k) != n {
			t.Fatalf("decoded key of %d bytes, want %d", len(k), n)
		}
		for i := range n * 8 {
			if k[i/8]&(0x80>>(i%8)) != 0 {
				ones[i]++
			}
		}
	}
	varying = make([]bool, n*8)
	for i, c := range ones {
		varying[i] = c > 0 && c < len(keys)
	}
	return varying
}

// A minted key carries 128 bits of entropy: NewCompactKey's 128 bits all vary
// across keys, and NewKey's 122 random bits vary while its version and
// variant bits are fixed (a UUIDv4, which OpenWOP names as satisfying the
// requirement). A key built from a counter, a clock or a short random value
// leaves bits constant and fails this.
func TestKeyEntropy(t *testing.T) {
	const samples = 512 // a fixed random bit stays constant with probability 2^-511
	var uuids, compact [][]byte
	for range samples {
		u, err := hex.DecodeString(strings.ReplaceAll(NewKey(), "-", ""))
		if err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, u)
		c, err := base64.RawURLEncoding.DecodeString(NewCompactKey())
		if err != nil {
			t.Fatal(err)
		}
		compact = append(compact, c)
	}
	for i, v := range bitsVarying(t, compact, 16) {
		if !v {
			t.Fatalf("NewCompactKey: bit %d is constant across %d keys", i, samples)
		}
	}
	fixed := map[int]bool{48: true, 49: true, 50: true, 51: true, 64: true, 65: true} // version 0100, variant 10
	random := 0
	for i, v := range bitsVarying(t, uuids, 16) {
		switch {
		case fixed[i] && v:
			t.Fatalf("NewKey: version/variant bit %d varies", i)
		case !fixed[i] && !v:
			t.Fatalf("NewKey: random bit %d is constant across %d keys", i, samples)
		case v:
			random++
		}
	}
	if random != 122 {
		t.Fatalf("NewKey has %d random bits, want 122", random)
	}
}

// Retry-After is honoured on every retryable answer, not only on the 409
// in-flight: the wait before the next attempt is at least what the server
// asked, plus a jitter bounded by BaseDelay. Without Retry-After the wait is
// the exponential backoff.
func TestRetryAfterHonouredOnEveryRetryableAnswer(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	cases := []struct {
		name   string
		first  step
		lo, hi time.Duration // the wait's bounds, inclusive
	}{
		{"429", envelope(429, "rate_limited", "Retry-After", "2"), 2 * time.Second, 2*time.Second + 10*time.Millisecond},
		{"503", status(503, "Retry-After", "3"), 3 * time.Second, 3*time.Second + 10*time.Millisecond},
		{"500 HTTP-date", status(500, "Retry-After", now.Add(7*time.Second).Format(http.TimeFormat)), 7 * time.Second, 7*time.Second + 10*time.Millisecond},
		{"409 in-flight", envelope(409, "idempotency_in_flight", "Retry-After", "1"), time.Second, time.Second + 10*time.Millisecond},
		{"409 in-flight, no Retry-After", envelope(409, "idempotency_in_flight"), 5 * time.Millisecond, 10 * time.Millisecond},
		{"503, malformed Retry-After", status(503, "Retry-After", "soon"), 5 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t, tc.first, status(201))
			var w waits
			cfg := fastConfig(&w)
			cfg.Now = func() time.Time { return now }
			cfg.MaxElapsed = time.Minute
			c := mustNew(t, cfg)
			resp, _, err := post(t, c, s.srv.URL, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			got := w.all()
			if resp.StatusCode != 201 || resp.Attempts != 2 || len(got) != 1 {
				t.Fatalf("status %d attempts %d waits %v", resp.StatusCode, resp.Attempts, got)
			}
			if got[0] < tc.lo || got[0] > tc.hi {
				t.Fatalf("wait %v, want in [%v, %v]", got[0], tc.lo, tc.hi)
			}
			sameKeys(t, s, resp.Key)
		})
	}
}

// Retry-After is a floor, not a replacement for the backoff: a server that
// keeps answering "Retry-After: 0" does not get a tight retry loop, the waits
// still grow exponentially.
func TestRetryAfterZeroStillBacksOff(t *testing.T) {
	s := newScripted(t, status(503, "Retry-After", "0"), status(503, "Retry-After", "0"), status(503, "Retry-After", "0"),
		status(503, "Retry-After", "0"), status(201))
	var w waits
	c := mustNew(t, fastConfig(&w))
	resp, _, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Attempts != 5 {
		t.Fatalf("status %d attempts %d", resp.StatusCode, resp.Attempts)
	}
	got := w.all()
	if len(got) != 4 {
		t.Fatalf("waits %v", got)
	}
	for i, d := range got {
		hi := min(80*time.Millisecond, 10*time.Millisecond<<i)
		if d < hi/2 || d >= hi {
			t.Fatalf("wait %d = %v, want the backoff in [%v, %v) (waits %v)", i+1, d, hi/2, hi, got)
		}
	}
}

// The jitter is real: the random source spreads the wait over [d/2, d), and
// over [Retry-After, Retry-After+BaseDelay] when the server set one.
func TestJitterUsesTheRandomSource(t *testing.T) {
	at := func(r float64, n int, ra time.Duration, haveRA bool) time.Duration {
		c := Config{BaseDelay: 100 * time.Millisecond, MaxDelay: 3 * time.Second, Rand: func() float64 { return r }}.withDefaults()
		return backoff(&c, n, ra, haveRA)
	}
	if lo, hi := at(0, 3, 0, false), at(0.999, 3, 0, false); lo != 200*time.Millisecond || hi < 399*time.Millisecond || hi >= 400*time.Millisecond {
		t.Fatalf("third wait spans [%v, %v], want [200ms, 400ms)", lo, hi)
	}
	if lo, hi := at(0, 1, 2*time.Second, true), at(0.999, 1, 2*time.Second, true); lo != 2*time.Second || hi < 2*time.Second+99*time.Millisecond || hi > 2*time.Second+100*time.Millisecond {
		t.Fatalf("Retry-After 2s wait spans [%v, %v], want [2s, 2.1s]", lo, hi)
	}
	// A huge Retry-After with a huge BaseDelay does not wrap around.
	huge, _ := RetryAfter("9999999999999", time.Now())
	c0 := Config{BaseDelay: time.Hour, MaxDelay: time.Hour, Rand: func() float64 { return 0.999 }}.withDefaults()
	if w := backoff(&c0, 1, huge, true); w < huge {
		t.Fatalf("wait %v shorter than Retry-After %v", w, huge)
	}
	// With the default random source, a crowd of clients does not retry in
	// lockstep.
	c := Config{}.withDefaults()
	seen := map[time.Duration]bool{}
	for range 64 {
		seen[backoff(&c, 2, 0, false)] = true
	}
	if len(seen) < 32 {
		t.Fatalf("64 default waits took only %d distinct values", len(seen))
	}
}

// fakeClock is a clock that only Sleep advances.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept time.Duration
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
	f.slept += d
	return ctx.Err()
}

// MaxElapsed bounds the whole call, not each wait: against a server that is
// never available, the waits together stay inside it and the call ends with
// the last answer long before MaxAttempts. The waits are on the injected
// clock; the budget's timer that ends a hung attempt is real, so the budget
// is two minutes, which no answer of a loaded machine uses up (each answer
// here takes 300 ms of real time, as one may there: with a budget of 2 s
// the timer ended the call).
func TestMaxElapsedBoundsTotalTime(t *testing.T) {
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		status(503)(w, r)
	})
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := mustNew(t, Config{MaxAttempts: 1000, MaxElapsed: 2 * time.Minute, BaseDelay: 6 * time.Second,
		MaxDelay: 24 * time.Second, Now: clk.Now, Sleep: clk.Sleep})
	resp, body, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || body != `{"status":503}` {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	if clk.slept > 2*time.Minute {
		t.Fatalf("waited %v in total, past MaxElapsed 2m", clk.slept)
	}
	// 2m of waits of at most 24s each: at least 5 retries, and far fewer
	// than MaxAttempts.
	if resp.Attempts < 6 || resp.Attempts > 40 || s.count() != resp.Attempts {
		t.Fatalf("attempts %d (server %d), slept %v", resp.Attempts, s.count(), clk.slept)
	}
	sameKeys(t, s, resp.Key)
}

// The context's deadline ends an attempt that hangs: the call fails with the
// context's error (in a *Error carrying the key), it does not wait for
// MaxElapsed.
func TestContextDeadlineEndsHungAttempt(t *testing.T) {
	srv := hungServer(t)
	c := mustNew(t, Config{MaxElapsed: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{}`))
	_, err := c.Do(req)
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("err %v", err)
	}
	if ce.Attempts != 1 || !uuidV4.MatchString(ce.Key) {
		t.Fatalf("attempts %d key %q", ce.Attempts, ce.Key)
	}
}

// The ERP policy marks every answer: "Idempotency-Replayed: false" on a first
// execution is not a replay.
func TestReplayMarkerFalseIsFresh(t *testing.T) {
	for _, tc := range []struct {
		hdr, val string
		want     bool
	}{
		{"Idempotency-Replayed", "false", false},
		{"Idempotency-Replayed", "TRUE", true},
		{"Idempotent-Replayed", "true", true},
		{"OpenWOP-Idempotent-Replay", "true", true},
		{"OpenWOP-Idempotent-Replay", "1", false},
		{"X-Other", "true", false},
	} {
		s := newScripted(t, status(201, tc.hdr, tc.val))
		resp, _, err := post(t, mustNew(t, Config{}), s.srv.URL, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Replayed != tc.want {
			t.Errorf("%s: %s gave Replayed %v, want %v", tc.hdr, tc.val, resp.Replayed, tc.want)
		}
	}
}

// A 307/308 redirect is part of the same logical call: Client.Do sends the
// minted key, and the body, to the new location too, and Attempts counts
// every hop.
func TestRedirectKeepsTheMintedKey(t *testing.T) {
	var mu sync.Mutex
	var keys, bodies []string
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := new(strings.Builder)
		_, _ = io.Copy(b, r.Body)
		mu.Lock()
		keys = append(keys, strings.Join(r.Header.Values("Idempotency-Key"), ","))
		bodies = append(bodies, r.URL.Path+" "+b.String())
		n++
		i := n
		mu.Unlock()
		switch {
		case r.URL.Path == "/old":
			http.Redirect(w, r, "/new", http.StatusPermanentRedirect)
		case i == 2:
			w.WriteHeader(503)
		default:
			w.WriteHeader(201)
		}
	}))
	defer srv.Close()
	var w waits
	c := mustNew(t, fastConfig(&w))
	resp, _, err := post(t, c, srv.URL+"/old", `{"a":1}`)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 201 || len(keys) != 3 || resp.Attempts != 3 {
		t.Fatalf("status %d attempts %d keys %q", resp.StatusCode, resp.Attempts, keys)
	}
	for _, k := range keys {
		if k != resp.Key {
			t.Fatalf("keys %q, want %q on every hop and attempt", keys, resp.Key)
		}
	}
	if bodies[0] != `/old {"a":1}` || bodies[1] != `/new {"a":1}` || bodies[2] != `/new {"a":1}` {
		t.Fatalf("bodies %q", bodies)
	}
}

// A POST answered with 303 See Other (replayed) and followed by a GET is one
// call: its Result keeps the POST's key and replay flag.
func TestSeeOtherKeepsThePostResult(t *testing.T) {
	var keys []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Method+" "+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if r.Method == http.MethodPost {
			w.Header().Set("OpenWOP-Idempotent-Replay", "true")
			http.Redirect(w, r, "/runs/1", http.StatusSeeOther)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	c := mustNew(t, Config{})
	resp, _, err := post(t, c, srv.URL+"/runs", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || resp.Attempts != 2 || !resp.Replayed || keys[0] != "POST "+resp.Key || keys[1] != "GET " {
		t.Fatalf("status %d result %+v requests %q", resp.StatusCode, resp.Result, keys)
	}
}

// A body that is a plain io.Reader (no GetBody) is replayed on a 307/308 hop
// too: Client.Do follows the redirect with the same key and body instead of
// handing the caller the 307/308 (http.Client alone cannot re-send such a
// body).
func TestRedirectReplaysAReaderBody(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		var mu sync.Mutex
		var seen []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			seen = append(seen, r.URL.Path+" "+r.Header.Get("Idempotency-Key")+" "+string(b))
			mu.Unlock()
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", code)
				return
			}
			w.WriteHeader(201)
		}))
		c := mustNew(t, Config{})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/old", nonReplayable{strings.NewReader(`{"a":1}`)})
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		want := []string{"/old " + resp.Key + ` {"a":1}`, "/new " + resp.Key + ` {"a":1}`}
		if resp.StatusCode != 201 || resp.Attempts != 2 || strings.Join(seen, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%d: status %d result %+v requests %q, want %q", code, resp.StatusCode, resp.Result, seen, want)
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk gone") }

// A body that cannot be read fails the call before anything is sent, with
// the key in the *Error, as through a plain http.Client.
func TestUnreadableBodySendsNothing(t *testing.T) {
	s := newScripted(t, status(201))
	c := mustNew(t, Config{})
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL, io.MultiReader(strings.NewReader("{"), failingReader{}))
	_, err := c.Do(req)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key == "" || ce.Attempts != 0 || !strings.Contains(err.Error(), "disk gone") || s.count() != 0 {
		t.Fatalf("err %v (%+v), server saw %d requests", err, ce, s.count())
	}
}

// The hops of a redirected Client.Do call are one logical call: they share
// MaxElapsed and MaxAttempts. A hop reached with no attempts left makes one
// attempt and no retries; one reached after MaxElapsed makes none.
func TestRedirectHopsShareTheBudget(t *testing.T) {
	// redirecting answers 503 to its first n requests on /old, then 307 to
	// /new, which answers 503 forever.
	redirecting := func(n int) *scripted {
		var steps []step
		for range n {
			steps = append(steps, status(503))
		}
		steps = append(steps, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
		}, status(503))
		return newScripted(t, steps...)
	}
	t.Run("MaxElapsed", func(t *testing.T) {
		s := redirecting(4)
		clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		c := mustNew(t, Config{MaxAttempts: 1000, MaxElapsed: time.Minute, BaseDelay: 10 * time.Second,
			MaxDelay: 10 * time.Second, Now: clk.Now, Sleep: clk.Sleep})
		resp, _, err := post(t, c, s.srv.URL+"/old", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 503 || clk.slept > time.Minute || s.count() != resp.Attempts {
			t.Fatalf("status %d attempts %d (server %d): waited %v in total, past MaxElapsed 1m", resp.StatusCode, resp.Attempts, s.count(), clk.slept)
		}
		sameKeys(t, s, resp.Key)
	})
	t.Run("MaxAttempts", func(t *testing.T) {
		s := redirecting(2)
		var w waits
		cfg := fastConfig(&w)
		cfg.MaxAttempts = 3
		c := mustNew(t, cfg)
		resp, _, err := post(t, c, s.srv.URL+"/old", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		// 503, 503, 307 use the three attempts; /new gets one.
		if resp.StatusCode != 503 || resp.Attempts != 4 || s.count() != 4 {
			t.Fatalf("status %d attempts %d (server %d), want 4: the hop got a fresh MaxAttempts", resp.StatusCode, resp.Attempts, s.count())
		}
		sameKeys(t, s, resp.Key)
	})
	t.Run("hop after MaxElapsed", func(t *testing.T) {
		s := redirecting(1)
		clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		// The 503's Retry-After fits just inside the budget; the 307 then
		// arrives with none left (the fake clock jumps 1 m on that wait).
		s.steps[0] = status(503, "Retry-After", "59")
		c := mustNew(t, Config{MaxElapsed: time.Minute, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond,
			Now: clk.Now, Sleep: func(ctx context.Context, d time.Duration) error {
				_ = clk.Sleep(ctx, time.Minute)
				return ctx.Err()
			}})
		_, _, err := post(t, c, s.srv.URL+"/old", `{}`)
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrBudgetExhausted) || ce.Attempts != 2 || s.count() != 2 {
			t.Fatalf("err %v (%+v), server saw %d requests; want the budget exhausted after 2 attempts", err, ce, s.count())
		}
	})
}

// A connection reset while the server is reading the request body (after
// 100 bytes of 1 MiB, the body a plain io.Reader) is retried with the same
// key and the whole body, byte for byte.
func TestResetMidRequestBodyReplaysWholeBody(t *testing.T) {
	var mu sync.Mutex
	var keys, bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			buf := make([]byte, 100)
			_, _ = io.ReadFull(r.Body, buf)
			drop(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(201)
	}))
	defer srv.Close()
	body := strings.Repeat("0123456789abcdef", 1<<16)
	var w waits
	c := mustNew(t, fastConfig(&w))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(strings.NewReader(body)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 201 || resp.Attempts != 2 || len(keys) != 2 || keys[0] != resp.Key || keys[1] != resp.Key {
		t.Fatalf("status %d result %+v keys %q", resp.StatusCode, resp.Result, keys)
	}
	if len(bodies) != 1 || bodies[0] != body {
		t.Fatalf("the retry carried %d bodies, want the whole body once", len(bodies))
	}
}

// A 504 from the gateway (the first attempt timed out there while the
// operation ran on) is retried with the same key; the server then answers
// 409 idempotency_in_flight with Retry-After, which is polled without using
// up MaxAttempts, until the first request's answer is replayed.
func TestGatewayTimeoutThenInFlightThenReplay(t *testing.T) {
	replay := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("OpenWOP-Idempotent-Replay", "true")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"runId":"r1"}`)
	}
	inFlight := envelope(409, "idempotency_in_flight", "Retry-After", "1")
	s := newScripted(t, status(504), inFlight, inFlight, inFlight, replay)
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxAttempts = 2
	c := mustNew(t, cfg)
	resp, body, err := post(t, c, s.srv.URL, `{"x":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || body != `{"runId":"r1"}` || !resp.Replayed || resp.Attempts != 5 {
		t.Fatalf("status %d body %q result %+v", resp.StatusCode, body, resp.Result)
	}
	for i, d := range w.all()[1:] {
		if d < time.Second {
			t.Fatalf("poll %d after %v, sooner than Retry-After", i+1, d)
		}
	}
	sameKeys(t, s, resp.Key)
	sameBodies(t, s, `{"x":1}`)
}

// A 5xx or 429 that carries a replay marker is the server's recorded outcome
// for this key (the commerce platform's policy replays a failed action as
// failed, and the key never runs again): a retry under the same key can only
// replay it again, so it is final.
func TestReplayedFailureIsFinal(t *testing.T) {
	for _, hdr := range DefaultReplayHeaders {
		for _, code := range []int{500, 503, 429} {
			s := newScripted(t, status(500), status(code, hdr, "true", "Retry-After", "1"))
			var w waits
			c := mustNew(t, fastConfig(&w))
			resp, body, err := post(t, c, s.srv.URL, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != code || !resp.Replayed || resp.Attempts != 2 || s.count() != 2 || len(w.all()) != 1 || body != fmt.Sprintf(`{"status":%d}`, code) {
				t.Fatalf("%s %d: status %d result %+v (server %d, waits %v): a replayed failure was retried", hdr, code, resp.StatusCode, resp.Result, s.count(), w.all())
			}
			sameKeys(t, s, resp.Key)
		}
	}
}

// cut answers with headers and the start of a body, then drops the
// connection before the body's declared length arrived.
func cut(code int, partial string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "200")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, partial)
		w.(http.Flusher).Flush()
		drop(w, r)
	}
}

// A 409 whose body is cut before the client could read its error code is
// an answer that never arrived whole: the client cannot tell an in-flight
// poll from a mismatch, and a retry under the same key is safe either way
// (a mismatch answers mismatch again), so it is retried like a transport
// error, not handed to the caller as final with a body that fails to read.
func TestCutConflictIsRetried(t *testing.T) {
	for _, partial := range []string{`{"error":"idempotency_in_flight","mess`, `{"error":"idempotency_in_flight","message":"m"}`} {
		s := newScripted(t, cut(409, partial), status(201, "OpenWOP-Idempotent-Replay", "true"))
		var w waits
		c := mustNew(t, fastConfig(&w))
		resp, body, err := post(t, c, s.srv.URL, `{"a":1}`)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 201 || !resp.Replayed || resp.Attempts != 2 || s.count() != 2 || body != `{"status":201}` {
			t.Fatalf("%q: status %d result %+v (server %d): the cut 409 was final", partial, resp.StatusCode, resp.Result, s.count())
		}
		sameKeys(t, s, resp.Key)
		sameBodies(t, s, `{"a":1}`)
	}
}

// A request whose Method is "" is a GET (net/http's rule for client
// requests, as a struct literal builds it): it passes through untouched,
// no key and no retries, like any other GET.
func TestEmptyMethodIsAGet(t *testing.T) {
	if Mutating("") {
		t.Error(`Mutating("") is true; "" means GET`)
	}
	s := newScripted(t, status(503), status(200))
	var w waits
	c := mustNew(t, fastConfig(&w))
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL, nil)
	req.Method = ""
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp.StatusCode != 503 || resp.Attempts != 1 || resp.Key != "" || s.n != 1 || s.keys[0] != "" {
		t.Fatalf("status %d result %+v, server saw %d requests with keys %q: a GET got a key and retries", resp.StatusCode, resp.Result, s.n, s.keys)
	}
}

// A Retry-After of more seconds than a Duration holds is the longest wait
// there is, not a malformed value: the client does not retry sooner than
// the server asked (on the 503, the 429 and the in-flight 409 alike); the
// wait does not fit in the budget, so the answer is returned with its
// Retry-After after one attempt. (A value past what the client can
// represent is taken as the greatest it can, as RFC 9111 §1.2.2 says of
// delta-seconds.)
func TestHugeRetryAfterIsHonoured(t *testing.T) {
	const huge = "99999999999999999999" // more than 2^63-1 seconds
	for _, first := range []step{
		status(503, "Retry-After", huge),
		envelope(429, "rate_limited", "Retry-After", huge),
		envelope(409, "idempotency_in_flight", "Retry-After", huge),
	} {
		s := newScripted(t, first, status(201))
		var w waits
		c := mustNew(t, fastConfig(&w))
		resp, _, err := post(t, c, s.srv.URL, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 201 || resp.Attempts != 1 || s.count() != 1 || len(w.all()) != 0 || resp.Header.Get("Retry-After") != huge {
			t.Fatalf("status %d result %+v (server %d, waits %v): retried sooner than Retry-After %s", resp.StatusCode, resp.Result, s.count(), w.all(), huge)
		}
	}
}

// Only the commerce policy's pending answer, which names no action, is
// polled: a 202 naming the action (a run still pending, the action as it
// is now), a 202 without a replay marker (an API's own first answer), one
// marked by another policy's header and the pending answer asked for at
// once (Idempotency-Mode: async, any case) are final.
func TestOnlyThePendingAnswerIsPolled(t *testing.T) {
	pending := func(body string, hdr ...string) step {
		return func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(202)
			_, _ = io.WriteString(w, body)
		}
	}
	const none = `{"status":"pending","requestId":"req_1"}`
	replayed := []string{"Idempotent-Replayed", "true", "Retry-After", "1"}
	for _, tc := range []struct {
		name   string
		first  step
		mode   string
		polled bool
	}{
		{"pending answer", pending(none, replayed...), "", true},
		{"pending answer, sync", pending(none, replayed...), "Sync", true},
		{"pending answer, async", pending(none, replayed...), "ASYNC", false},
		// The header spelt otherwise in the caller's map (RED_TEAM 479).
		{"pending answer, async spelt idempotency-mode", pending(none, replayed...), "async", false},
		{"pending action naming its run", pending(`{"runId":"r1","status":"pending","links":{}}`, replayed...), "", false},
		{"first answer 202, no replay marker", pending(none, "Retry-After", "1"), "", false},
		{"replay marker false", pending(none, "Idempotency-Replayed", "false", "Retry-After", "1"), "", false},
		// Under the OpenWOP and ERP policies a 202 replay is the stored
		// answer of a handler that answers 202 itself: polling it would
		// only replay it again.
		{"OpenWOP replay of a handler's 202", pending(none, "OpenWOP-Idempotent-Replay", "true", "Retry-After", "1"), "", false},
		{"ERP replay of a handler's 202", pending(none, "Idempotency-Replayed", "true", "Retry-After", "1"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t, tc.first, status(201, "Idempotent-Replayed", "true"))
			var w waits
			c := mustNew(t, fastConfig(&w))
			req, _ := http.NewRequest(http.MethodPost, s.srv.URL, strings.NewReader(`{}`))
			if spelt, ok := strings.CutPrefix(tc.name, "pending answer, async spelt "); ok {
				req.Header[spelt] = []string{tc.mode}
			} else if tc.mode != "" {
				req.Header.Set("Idempotency-Mode", tc.mode)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want, attempts := 202, 1
			if tc.polled {
				want, attempts = 201, 2
			}
			if resp.StatusCode != want || resp.Attempts != attempts || s.count() != attempts {
				t.Fatalf("status %d %s result %+v (server %d), want %d after %d attempt(s)", resp.StatusCode, b, resp.Result, s.count(), want, attempts)
			}
			if !tc.polled && !strings.Contains(string(b), "pending") {
				t.Fatalf("the 202's body is not readable whole: %q", b)
			}
			if tc.polled && (len(w.all()) != 1 || w.all()[0] < time.Second) {
				t.Fatalf("waits %v, want one of at least Retry-After 1 s", w.all())
			}
			sameKeys(t, s, resp.Key)
		})
	}
}

// DeriveKey joins its parts unambiguously, a part holding a NUL byte
// included: two different business events never share a key (a shared
// key replays the first event's answer to the second). The keys of parts
// without NUL are the ones earlier versions derived, so a process upgraded
// mid-retry still sends the key its predecessor sent.
func TestDeriveKeyJoinsAnyPartsUnambiguously(t *testing.T) {
	for want, parts := range map[string][]string{
		"wuutMG4bB7h7x3ybFJjVERygu1HIQIBmMk9xfM64GG8": {"checkout", "cart_8813"},
		"8no7BcQ3OqO6boh9ot-Vczasb0-jMXz1k1cLBQ5pbYI": {},
		"d4JpOnyIelALZ44rlwI8YfFr31-O8cYFaqoIg8CpbtM": {""},
		"NwUMnhZU0wPiNLFKFtaWZ5KR1IR_RRJuEt2IjwbgtyU": {"a", "b"},
	} {
		if got := DeriveKey(parts...); got != want {
			t.Errorf("DeriveKey(%q) = %s, want %s (the key earlier versions derived)", parts, got, want)
		}
	}
	tuples := [][]string{
		{"a", "b"}, {"a\x00b"}, {"a\x00", "b"}, {"a", "\x00b"}, {"a\x00\x00b"}, {"a", "", "b"},
		{"checkout", "cart_1\x00refund"}, {"checkout", "cart_1", "refund"},
		{"\x00"}, {""}, {"", ""}, {}, {"\x00", ""}, {"", "\x00"},
	}
	seen := map[string][]string{}
	for _, p := range tuples {
		k := DeriveKey(p...)
		if prev, ok := seen[k]; ok {
			t.Errorf("DeriveKey(%q) == DeriveKey(%q) = %s", p, prev, k)
		}
		seen[k] = p
		if len(k) != 43 {
			t.Errorf("DeriveKey(%q) = %q, want 43 characters", p, k)
		}
	}
}

// No error of a call carries the idempotency key or the credential in its
// text: the key is in (*Error).Key for the caller to use, never in what a
// caller logs with %v. Every way a call fails: attempts used up on
// transport errors, the budget out during a hung attempt, the context
// cancelled during a wait, a body that cannot be read, a GetBody that
// fails on a retry.
func TestErrorsNeverCarryTheKeyOrCredential(t *testing.T) {
	const key, credential = "caller-key-0123456789abcdefXYZ", "idk_S3cr3tCredentialValue"
	dropping := newScripted(t, drop)
	hung := hungServer(t)
	unavailable := newScripted(t, status(503))
	for name, call := range map[string]func() error{
		"attempts used up": func() error {
			var w waits
			cfg := fastConfig(&w)
			cfg.MaxAttempts = 2
			req, _ := http.NewRequest(http.MethodPost, dropping.srv.URL, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+credential)
			req.Header.Set("Idempotency-Key", key)
			_, err := mustNew(t, cfg).Do(req)
			return err
		},
		"budget out": func() error {
			req, _ := http.NewRequest(http.MethodPost, hung.URL, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+credential)
			_, err := mustNew(t, Config{MaxElapsed: 50 * time.Millisecond}).Do(req.WithContext(WithKey(req.Context(), key)))
			return err
		},
		"cancelled during a wait": func() error {
			ctx, cancel := context.WithCancel(WithKey(context.Background(), key))
			cfg := Config{Sleep: func(c context.Context, d time.Duration) error { cancel(); return c.Err() }}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, unavailable.srv.URL, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+credential)
			_, err := mustNew(t, cfg).Do(req)
			return err
		},
		"unreadable body": func() error {
			req, _ := http.NewRequest(http.MethodPost, unavailable.srv.URL, failingReader{})
			req.Header.Set("Idempotency-Key", key)
			_, err := mustNew(t, Config{}).Do(req)
			return err
		},
		"GetBody fails on a retry": func() error {
			var w waits
			req, _ := http.NewRequest(http.MethodPost, unavailable.srv.URL, strings.NewReader(`{}`))
			req.Header.Set("Idempotency-Key", key)
			n := 0
			req.GetBody = func() (io.ReadCloser, error) {
				if n++; n > 1 {
					return nil, errors.New("gone")
				}
				return io.NopCloser(strings.NewReader(`{}`)), nil
			}
			_, err := mustNew(t, fastConfig(&w)).Do(req)
			return err
		},
	} {
		err := call()
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: err %v, want a *Error carrying the key", name, err)
			continue
		}
		for _, text := range []string{err.Error(), fmt.Sprintf("%v %+v %s", err, err, err)} {
			if strings.Contains(text, key) || strings.Contains(text, credential) {
				t.Errorf("%s: the error's text carries the key or the credential: %s", name, text)
			}
		}
	}
}
