package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/canon"
)

// keepRawBodyHash is the OpenWOP preset with Policy.KeepRawBodyHash set,
// as the ERP policy has it.
func keepRawBodyHash(c *idem.Config) {
	c.Policy = idem.PolicyOpenWOP
	c.Policy.KeepRawBodyHash = true
}

// TestRawBodySHA256IsTheBodysOwnHash: under a policy that keeps it
// (Policy.KeepRawBodyHash), the record's RawBodySHA256 is the
// SHA-256 of the request body's bytes as received (after base64 decoding),
// whichever way the digest went: a JSON body already in canonical form
// (whose digest hashes those very bytes, so the one hash serves both), one
// that is not, one with a number the digest writes again to the same text,
// a body that is not JSON (hashed as bytes by the digest too), an empty
// one, a base64 one, and on a route with a normaliser.
func TestRawBodySHA256IsTheBodysOwnHash(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		b64, normalize          bool
	}{
		{name: "canonical JSON", contentType: "application/json", body: `{"a":[1,"é",true],"b":{"c":null}}`},
		{name: "JSON not canonical", contentType: "application/json", body: `{"b":1, "a":"\u00e9"}`},
		{name: "canonical JSON, a long number", contentType: "application/json", body: `{"a":0.30000000000000004}`},
		{name: "not JSON", contentType: "text/plain", body: "plain text"},
		{name: "empty JSON", contentType: "application/json", body: ""},
		{name: "base64 JSON", contentType: "application/json", body: `{"a":1}`, b64: true},
		{name: "normalised JSON", contentType: "application/json", body: `{"a":1,"t":"x"}`, normalize: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *idem.Config) {
				keepRawBodyHash(c)
				if tc.normalize {
					c.Normalize = &canon.Normalizer{Name: "no-t", Exclude: []string{"t"}}
				}
			})
			ev := v2event("POST", "POST /runs", testKey, tc.body)
			ev.Headers["content-type"] = tc.contentType
			if tc.b64 {
				ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(tc.body)), true
			}
			if r := e.call(&handler{}, ev); r.StatusCode != 201 {
				t.Fatalf("%d %s", r.StatusCode, r.Body)
			}
			rec, found, err := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
			if err != nil || !found {
				t.Fatalf("record: %v, %v", found, err)
			}
			sum := sha256.Sum256([]byte(tc.body))
			if want := hex.EncodeToString(sum[:]); rec.RawBodySHA256 != want {
				t.Fatalf("RawBodySHA256 = %q, want %q", rec.RawBodySHA256, want)
			}
		})
	}
}

// rawSpy records the raw body hash every store call of the Guard carries.
type rawSpy struct {
	idem.Store
	mu    sync.Mutex
	calls []string // "Claim <hash>", "Complete <hash>", "Release <hash>"
}

func (s *rawSpy) note(call, raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call+" "+raw)
}

func (s *rawSpy) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	s.note("Claim", rec.RawBodySHA256)
	return s.Store.Claim(ctx, rec, now)
}

func (s *rawSpy) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.note("Complete", claim.RawBodySHA256)
	return s.Store.Complete(ctx, claim, out, now)
}

func (s *rawSpy) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	s.note("Release", claim.RawBodySHA256)
	return s.Store.Release(ctx, claim, now)
}

func (s *rawSpy) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// TestClaimCarriesNoRawBodyHash: under a policy that keeps it, the
// Guard's claim carries no raw body
// hash, so a replay, an in-flight answer and a mismatch never need one;
// the writes that end an attempt carry the hash of the body whose attempt
// ran: the completion, and the release of a handler error (whose retry,
// sent in other bytes of the same canonical request, replaces it).
func TestClaimCarriesNoRawBodyHash(t *testing.T) {
	spy := &rawSpy{}
	e := newEnv(t, func(c *idem.Config) { keepRawBodyHash(c); spy.Store = c.Store; c.Store = spy })
	hash := func(b string) string { s := sha256.Sum256([]byte(b)); return hex.EncodeToString(s[:]) }
	want := func(what string, calls ...string) {
		t.Helper()
		if got := spy.take(); !reflect.DeepEqual(got, calls) {
			t.Fatalf("%s: store calls %q, want %q", what, got, calls)
		}
	}
	first, second := `{"b":1, "a":2}`, `{"a":2,"b":1}` // one canonical request in two encodings

	failing := &handler{err: errors.New("boom")}
	if r := e.call(failing, v2event("POST", "POST /runs", testKey, first)); r.StatusCode != 500 {
		t.Fatalf("failing handler: %d %s", r.StatusCode, r.Body)
	}
	want("handler error", "Claim ", "Release "+hash(first))

	if r := e.call(&handler{}, v2event("POST", "POST /runs", testKey, second)); r.StatusCode != 201 {
		t.Fatalf("retry: %d %s", r.StatusCode, r.Body)
	}
	want("retry", "Claim ", "Complete "+hash(second))

	if r := e.call(&handler{}, v2event("POST", "POST /runs", testKey, first)); r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("replay: %d %v", r.StatusCode, r.Headers)
	}
	want("replay", "Claim ")

	if r := e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{"a":3}`)); r.StatusCode != 409 {
		t.Fatalf("mismatch: %d %s", r.StatusCode, r.Body)
	}
	want("mismatch", "Claim ")

	rec, found, err := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
	if err != nil || !found || rec.RawBodySHA256 != hash(second) {
		t.Fatalf("record: %+v, %v, %v; want the raw body hash of the attempt that completed", rec, found, err)
	}
}

// hangUpSpy is a rawSpy whose claim lands and whose client then hangs up
// before the answer arrives (hangUp, once set).
type hangUpSpy struct {
	rawSpy
	hangUp context.CancelFunc
}

func (s *hangUpSpy) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, err := s.rawSpy.Claim(ctx, rec, now)
	if s.hangUp != nil && err == nil {
		s.hangUp()
		if err := ctx.Err(); err != nil {
			return idem.ClaimResult{}, err // the answer lost to the cancellation
		}
		// The call's context is not the caller's (the claim waits for
		// its own answer): the answer arrives.
	}
	return res, err
}

// TestEveryAttemptEndHandsTheRawBodyHash: under a policy that keeps it,
// every way the Guard ends a
// claimed attempt without a completion releases the record with the raw
// body hash of that attempt (the ERP policy's raw_body_sha256 is on every
// ended record): a handler that panics, an answer the policy retries (a
// 503), a client that hung up while its claim was landing. The claim
// itself carries none. The released record holds the hash.
func TestEveryAttemptEndHandsTheRawBodyHash(t *testing.T) {
	hash := func(b string) string { s := sha256.Sum256([]byte(b)); return hex.EncodeToString(s[:]) }
	for _, c := range []struct {
		name   string
		h      *handler
		hangUp bool
	}{
		{name: "panic", h: &handler{panic: true}},
		{name: "retried answer", h: &handler{status: 503, body: `{"error":"unavailable","message":"later"}`}},
		{name: "client hung up during the claim", h: &handler{}, hangUp: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			spy := &hangUpSpy{}
			e := newEnv(t, func(cfg *idem.Config) { keepRawBodyHash(cfg); spy.Store = cfg.Store; cfg.Store = spy })
			body := `{"b":1, "a":"` + c.name + `"}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.hangUp {
				spy.hangUp = cancel
			}
			if _, err := e.guard.HTTPAPI(c.h.v2)(ctx, v2event("POST", "POST /runs", testKey, body)); err != nil {
				t.Fatal(err)
			}
			if got, want := spy.take(), []string{"Claim ", "Release " + hash(body)}; !reflect.DeepEqual(got, want) {
				t.Fatalf("store calls %q, want %q", got, want)
			}
			rec, found, err := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
			if err != nil || !found || rec.State != idem.StateRetryableFailure || rec.RawBodySHA256 != hash(body) {
				t.Fatalf("record: %+v, %v, %v; want retryable with the attempt's raw body hash", rec, found, err)
			}
		})
	}
}

// TestNoRawBodyHashUnlessThePolicyKeepsIt: the OpenWOP and commerce
// presets keep no raw body hash (Policy.KeepRawBodyHash unset): no write
// of an attempt that runs, completes or is released carries one, and the
// record holds none; the ERP preset keeps it.
func TestNoRawBodyHashUnlessThePolicyKeepsIt(t *testing.T) {
	if idem.PolicyOpenWOP.KeepRawBodyHash {
		t.Fatal("the OpenWOP preset keeps the raw body hash")
	}
	for _, name := range idem.PolicyNames() {
		p, err := idem.PolicyNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		if want := name == "erp"; p.KeepRawBodyHash != want {
			t.Errorf("policy %q: KeepRawBodyHash = %v, want %v", name, p.KeepRawBodyHash, want)
		}
	}
	spy := &rawSpy{}
	e := newEnv(t, func(c *idem.Config) { spy.Store = c.Store; c.Store = spy })
	body := `{"b":1, "a":2}` // not canonical: keeping its hash would take a second pass
	if r := e.call(&handler{panic: true}, v2event("POST", "POST /runs", testKey, body)); r.StatusCode != 500 {
		t.Fatalf("panicking handler: %d %s", r.StatusCode, r.Body)
	}
	if r := e.call(&handler{}, v2event("POST", "POST /runs", testKey, body)); r.StatusCode != 201 {
		t.Fatalf("retry: %d %s", r.StatusCode, r.Body)
	}
	if got, want := spy.take(), []string{"Claim ", "Release ", "Claim ", "Complete "}; !reflect.DeepEqual(got, want) {
		t.Fatalf("store calls %q, want %q", got, want)
	}
	rec, found, err := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
	if err != nil || !found || rec.State != idem.StateCompleted || rec.RawBodySHA256 != "" {
		t.Fatalf("record: %+v, %v, %v; want completed without a raw body hash", rec, found, err)
	}
}
