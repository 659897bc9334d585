package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// partnerPolicy is a fourth policy, defined here and nowhere in the
// library: every field differs from the presets.
var partnerPolicy = idem.Policy{
	Name: "partner",
	// Upper-case letters, digits and '#', 4..12 characters.
	Key: idem.KeyPolicy{Name: "partner", MinLen: 4, MaxLen: 12, Allow: idem.Chars("A-Z", "0-9", "#")},
	// A key belongs to the calling worker, on any operation.
	Scope: idem.ScopeParts{Credential: []string{"workerId"}},
	// Everything is final except an auth rejection: a 503 is replayed.
	Cache: func(status int, code string) idem.Disposition {
		if status == 401 || status == 403 {
			return idem.Forget
		}
		return idem.Replay
	},
	Retention: 48 * time.Hour,
	Headers: func(h map[string][]string, a idem.Answer) {
		if a.Replay {
			h["Partner-Replay"] = []string{a.OriginalRequestID}
		}
	},
	InFlight: idem.InFlightAnswer{RetryAfter: 7 * time.Second, Fixed: true},
	ErrorBody: func(e idem.ErrorInfo) []byte {
		b, _ := json.Marshal(map[string]any{"fault": strings.ToUpper(e.Code), "text": e.Message, "trace": e.RequestID})
		return b
	},
}

func partnerEnv(t *testing.T) *env {
	return newEnv(t, func(c *idem.Config) { c.Policy = partnerPolicy })
}

func partnerEvent(method, route, key, body, worker string) (ev events.APIGatewayV2HTTPRequest) {
	ev = v2event(method, route, key, body)
	if worker != "" {
		ev.RequestContext.Authorizer.Lambda["workerId"] = worker
	}
	return ev
}

// A policy defined outside the library is one value: the Guard follows its
// key grammar, scope, cache rule, retention, headers, in-flight answer and
// error body.
func TestCustomPolicyRunsThroughTheGuard(t *testing.T) {
	t.Run("key grammar", func(t *testing.T) {
		e := partnerEnv(t)
		h := &handler{}
		for _, bad := range []string{"abc#1", "AB", "ABCDEFGHIJKLM"} {
			r := e.call(h, partnerEvent("POST", "POST /orders", bad, `{}`, "w1"))
			var body map[string]any
			_ = json.Unmarshal([]byte(r.Body), &body)
			if r.StatusCode != 400 || body["fault"] != "IDEMPOTENCY_KEY_INVALID" || body["trace"] == "" {
				t.Fatalf("key %q: %d %s", bad, r.StatusCode, r.Body)
			}
		}
		if r := e.call(h, partnerEvent("POST", "POST /orders", "ORDER#42", `{}`, "w1")); r.StatusCode != 201 || h.Calls() != 1 {
			t.Fatalf("valid key: %d %s", r.StatusCode, r.Body)
		}
	})
	t.Run("scope is the worker, not the operation", func(t *testing.T) {
		e := partnerEnv(t)
		h := &handler{}
		first := partnerEvent("POST", "POST /orders", "ORDER#42", `{}`, "w1")
		e.call(h, first)
		r := e.call(h, partnerEvent("POST", "POST /refunds", "ORDER#42", `{}`, "w1"))
		var body map[string]any
		_ = json.Unmarshal([]byte(r.Body), &body)
		if r.StatusCode != 409 || body["fault"] != "IDEMPOTENCY_KEY_MISMATCH" || h.Calls() != 1 {
			t.Fatalf("same key, other operation: %d %s, %d runs", r.StatusCode, r.Body, h.Calls())
		}
		if r := e.call(h, partnerEvent("POST", "POST /orders", "ORDER#42", `{}`, "w2")); r.StatusCode != 201 || h.Calls() != 2 {
			t.Fatalf("other worker: %d, %d runs", r.StatusCode, h.Calls())
		}
		if r := e.call(h, partnerEvent("POST", "POST /orders", "ORDER#42", `{}`, "")); r.StatusCode != 401 || h.Calls() != 2 {
			t.Fatalf("no worker in the credential: %d, %d runs", r.StatusCode, h.Calls())
		}
		r = e.call(h, first)
		if r.Headers["Partner-Replay"] != first.RequestContext.RequestID || h.Calls() != 2 {
			t.Fatalf("replay: %v, %d runs", r.Headers, h.Calls())
		}
	})
	t.Run("cache rule and retention", func(t *testing.T) {
		e := partnerEnv(t)
		h := &handler{status: 503}
		ev := partnerEvent("POST", "POST /orders", "ORDER#42", `{}`, "w1")
		e.call(h, ev)
		if r := e.call(h, ev); r.StatusCode != 503 || h.Calls() != 1 || r.Headers["Partner-Replay"] == "" {
			t.Fatalf("503 not replayed: %d %v, %d runs", r.StatusCode, r.Headers, h.Calls())
		}
		if got := e.guard.Config().Retention; got != 48*time.Hour {
			t.Fatalf("retention %s", got)
		}
		e.clock.Advance(49 * time.Hour)
		if e.call(h, ev); h.Calls() != 2 {
			t.Fatalf("record outlived the policy's retention: %d runs", h.Calls())
		}
		h2 := &handler{status: 403}
		ev2 := partnerEvent("POST", "POST /orders", "ORDER#43", `{}`, "w1")
		e.call(h2, ev2)
		if e.call(h2, ev2); h2.Calls() != 2 {
			t.Fatalf("403 was kept: %d runs", h2.Calls())
		}
	})
	t.Run("in-flight answer", func(t *testing.T) {
		e := partnerEnv(t)
		block, started := make(chan struct{}), make(chan struct{})
		var once sync.Once
		h := &handler{block: block, before: func(context.Context) { once.Do(func() { close(started) }) }}
		ev := partnerEvent("POST", "POST /orders", "ORDER#42", `{}`, "w1")
		done := make(chan struct{})
		go func() { defer close(done); e.call(h, ev) }()
		<-started
		e.clock.Advance(250 * time.Second) // no renewal for two heartbeats, lease not yet expired: the owner looks dead, Fixed still answers 7
		r := e.call(h, ev)
		close(block)
		<-done
		var body map[string]any
		_ = json.Unmarshal([]byte(r.Body), &body)
		if r.StatusCode != 409 || r.Headers["Retry-After"] != "7" || body["fault"] != "IDEMPOTENCY_IN_FLIGHT" {
			t.Fatalf("in flight: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
	})
}

// New names every bad field of a policy in its ConfigError.
func TestInvalidPolicyNamesTheField(t *testing.T) {
	p := partnerPolicy
	p.Name = ""
	p.Key = idem.KeyPolicy{MinLen: 5, MaxLen: 2}
	p.Scope.Credential = []string{" "}
	p.Cache = nil
	p.Retention = time.Millisecond
	p.InFlight.RetryAfter = 0
	_, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Policy: p})
	var ce *idem.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"Policy.Name", "Policy.Key.Allow", "Policy.Key.MaxLen", "Policy.Scope.Credential[0]",
		"Policy.Cache", "Policy.Retention", "Policy.InFlight.RetryAfter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
	if err := p.Validate(); err == nil || !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("Validate: %v", err)
	}
	// Credential parts need a credential to read them from, unless there
	// is no authentication at all (SingleTenant: every part anonymous).
	_, err = idem.New(idem.Config{Store: memstore.New(), Tenant: idem.IAMPrincipal(), Policy: partnerPolicy})
	if err == nil || !strings.Contains(err.Error(), "Policy.Scope.Credential") {
		t.Fatalf("credential parts without a credential: %v", err)
	}
	if _, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("svc"), Policy: partnerPolicy}); err != nil {
		t.Fatalf("credential parts under SingleTenant (no authentication): %v", err)
	}
	for _, preset := range []idem.Policy{idem.PolicyOpenWOP, commerce.Policy, erp.Policy, partnerPolicy} {
		if err := preset.Validate(); err != nil {
			t.Errorf("%s: %v", preset.Name, err)
		}
	}
	// The headers a policy names are header names: a request id header
	// with a space would be set on every answer (API Gateway refuses such
	// a response), and a wait-mode header that is not one, or is the
	// key's own header, could never be sent right.
	for _, c := range []struct {
		mod   func(*idem.Policy)
		field string
	}{
		{func(p *idem.Policy) { p.RequestIDHeader = "X Request Id" }, "Policy.RequestIDHeader"},
		{func(p *idem.Policy) { p.RequestIDHeader = "X-Request-Id:" }, "Policy.RequestIDHeader"},
		{func(p *idem.Policy) { p.InFlight.ModeHeader = "Idempotency Mode" }, "Policy.InFlight.ModeHeader"},
		{func(p *idem.Policy) { p.InFlight.ModeHeader = "idempotency-key" }, "Policy.InFlight.ModeHeader"},
	} {
		p := partnerPolicy
		c.mod(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("RequestIDHeader %q, ModeHeader %q: %v, want a problem naming %s", p.RequestIDHeader, p.InFlight.ModeHeader, err, c.field)
		}
	}
}

// Configuration names a preset: openwop, commerce or erp.
func TestPolicyNamedFindsThePresets(t *testing.T) {
	for _, name := range idem.PolicyNames() {
		p, err := idem.PolicyNamed(strings.ToUpper(name))
		if err != nil || p.Name != name {
			t.Fatalf("%s: %v %q", name, err, p.Name)
		}
	}
	if p, err := idem.PolicyNamed(""); err != nil || p.Name != "openwop" {
		t.Fatalf("default: %v %q", err, p.Name)
	}
	_, err := idem.PolicyNamed("strict")
	if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "openwop, commerce, erp") {
		t.Fatalf("unknown: %v", err)
	}
}

// Chars builds an open key grammar; Runes counts code points and rejects
// invalid UTF-8.
func TestKeyGrammarIsOpen(t *testing.T) {
	kp := idem.KeyPolicy{Name: "greek", MinLen: 2, MaxLen: 3, Runes: true, Allow: idem.Chars("α-ω", "0-9")}
	for key, want := range map[string]string{
		"αβγ": "", "α1": "", "αβγδ": idem.ReasonLength, "a1": idem.ReasonCharset, "α\xff": idem.ReasonCharset, "α,β": idem.ReasonMultiple,
	} {
		err := kp.Validate(key)
		var ke *idem.KeyError
		if got := ""; errors.As(err, &ke) {
			got = ke.Reason
			if got != want {
				t.Errorf("%q: %s, want %s", key, got, want)
			}
		} else if want != "" {
			t.Errorf("%q accepted, want %s", key, want)
		}
	}
	comma := idem.KeyPolicy{Name: "comma", MinLen: 1, MaxLen: 9, Allow: idem.Chars("a-z", ",")}
	if err := comma.Validate("a,b"); err != nil {
		t.Fatalf("a comma the grammar allows is part of the key: %v", err)
	}
}

// Without Runes, Allow sees bytes: a character above U+007F in Chars
// matches the byte of its value, never its UTF-8 encoding. Keys are
// compared byte for byte: "é" precomposed and decomposed are two keys.
func TestKeyBytesAndNoNormalisation(t *testing.T) {
	bytesMode := idem.KeyPolicy{Name: "latin", MinLen: 1, MaxLen: 4, Allow: idem.Chars("a-z", "é")}
	if err := bytesMode.Validate("\xe9"); err != nil {
		t.Errorf("byte 0xE9: %v, want accepted (Allow sees the byte as U+00E9)", err)
	}
	if err := bytesMode.Validate("é"); !errors.Is(err, idem.ErrKeyInvalid) {
		t.Errorf("UTF-8 é without Runes: %v, want refused", err)
	}
	e := newEnv(t, func(c *idem.Config) {
		p := idem.PolicyOpenWOP
		p.Name = "unicode"
		p.Key = idem.KeyPolicy{Name: "unicode", MinLen: 1, MaxLen: 64, Runes: true, Allow: func(r rune) bool { return r > ' ' && r != ',' }}
		c.Policy = p
	})
	h := &handler{}
	nfc, nfd := "caf\u00e9-order-1", "cafe\u0301-order-1"
	for _, k := range []string{nfc, nfd, nfc, nfd} {
		if r := e.call(h, v2event("POST", "POST /runs", k, `{}`)); r.StatusCode != 201 {
			t.Fatalf("key %q: %d %s", k, r.StatusCode, r.Body)
		}
	}
	if h.Calls() != 2 {
		t.Errorf("%d runs, want 2: one per key form, each replayed once", h.Calls())
	}
}

// Chars reads a three-character spec with '-' in the middle as a range,
// any other as a list: "+-/" is '+' to '/' (comma included), "+/-" the
// three characters.
func TestCharsSpecs(t *testing.T) {
	rng, list := idem.Chars("+-/"), idem.Chars("+/-")
	for _, c := range []struct {
		r           rune
		inRange, in bool
	}{{'+', true, true}, {'/', true, true}, {'-', true, true}, {',', true, false}, {'.', true, false}} {
		if rng(c.r) != c.inRange || list(c.r) != c.in {
			t.Errorf("%q: range %v list %v, want %v %v", c.r, rng(c.r), list(c.r), c.inRange, c.in)
		}
	}
	if empty := idem.Chars("z-a"); empty('a') || empty('m') || empty('z') {
		t.Error(`"z-a" accepts a character`)
	}
}
