package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/idem/internal/lazyraw"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestRawBodySHA256IsTheBodysOwnHash: the record's RawBodySHA256 is the
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

// plainStore is a wrapper of the memory store that makes its own Claim:
// the memory store answers the Guard's lazy raw-hash handshake
// (idem/internal/lazyraw) as itself, not as the wrapper, so the Guard
// gives the wrapper the hash in every claim. claims records the
// RawBodySHA256 of every record its Claim was given.
type plainStore struct {
	*memstore.Store
	mu     sync.Mutex
	claims []string
}

func (p *plainStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	p.mu.Lock()
	p.claims = append(p.claims, rec.RawBodySHA256)
	p.mu.Unlock()
	return p.Store.Claim(ctx, rec, now)
}

// lazySpy is the memory store answering the Guard's handshake as itself,
// recording for every claim its decision and whether the raw body's hash
// was given in the record or asked for.
type lazySpy struct {
	*memstore.Store
	token lazyraw.Token // Store: the spy
	mu    sync.Mutex
	calls []string
}

type askedSource struct {
	lazyraw.Source
	asked bool
}

func (a *askedSource) RawBodySHA256() string {
	a.asked = true
	return a.Source.RawBodySHA256()
}

func (l *lazySpy) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	c := lazyraw.From(ctx)
	var src *askedSource
	if c != nil && c.Lazy {
		src = &askedSource{Source: c.Raw}
		c.Raw = src
	}
	res, err := l.Store.Claim(ctx, rec, now)
	if c != nil && c.AnsweredBy(l.Store) {
		c.Answer(&l.token)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case src != nil:
		l.calls = append(l.calls, fmt.Sprintf("%v asked=%t", res.Decision, src.asked))
	default:
		l.calls = append(l.calls, fmt.Sprintf("%v given=%t", res.Decision, rec.RawBodySHA256 != ""))
	}
	return res, err
}

// TestReplayDoesNotHashTheRawBody: once the store showed that it takes the
// raw body's hash only when a claim writes (the memory store; the first
// claim carries the hash and asks the question), the Guard leaves the hash
// to it: a later first execution's claim asks for it and stores the
// body's own hash, a replay and a mismatch do not ask (nothing is
// written). Any other store, and a wrapper of the memory store that makes
// its own Claim, is given the hash in every claim's record, replays
// included, as before. The answers are the same.
func TestReplayDoesNotHashTheRawBody(t *testing.T) {
	const body = `{"b":1, "a":"caf\u00e9"}` // not canonical: its digest hashes other bytes
	sum := sha256.Sum256([]byte(body))
	want := hex.EncodeToString(sum[:])
	const otherKey = "k_0123456789abcdefghijkX"
	run := func(t *testing.T, st idem.Store) []string {
		e := newEnv(t, func(c *idem.Config) { c.Store = st })
		var bodies []string
		for _, c := range []struct{ key, body string }{
			{otherKey, `{"c":3}`}, // the first claim: the handshake
			{testKey, body}, {testKey, body}, {testKey, `{"b":2}`},
		} {
			r := e.call(&handler{}, v2event("POST", "POST /runs", c.key, c.body))
			bodies = append(bodies, fmt.Sprint(r.StatusCode, " ", r.Headers["Openwop-Idempotent-Replay"]))
		}
		for key, want := range map[string]string{testKey: want, otherKey: rawOf(`{"c":3}`)} {
			rec, found, err := st.Get(context.Background(), scopeID(testTenant, "POST /runs", key), e.clock.Now())
			if err != nil || !found || rec.RawBodySHA256 != want {
				t.Fatalf("record: found %v, %v, RawBodySHA256 %q, want %q", found, err, rec.RawBodySHA256, want)
			}
		}
		return bodies
	}
	spy := &lazySpy{Store: memstore.New()}
	spy.token.Store = spy
	lazyAnswers := run(t, spy)
	if got := strings.Join(spy.calls, "; "); got != "claimed given=true; claimed asked=true; exists asked=false; exists asked=false" {
		t.Errorf("claims: %s", got)
	}
	plain := &plainStore{Store: memstore.New()}
	plainAnswers := run(t, plain)
	if got := strings.Join(plain.claims, " "); got != strings.Join([]string{rawOf(`{"c":3}`), want, want, rawOf(`{"b":2}`)}, " ") {
		t.Errorf("Claim records' RawBodySHA256: %s", got)
	}
	if !reflect.DeepEqual(lazyAnswers, plainAnswers) || lazyAnswers[1] != "201 " || lazyAnswers[2] != "201 true" || lazyAnswers[3] != "409 " {
		t.Errorf("answers: lazy %q, plain %q", lazyAnswers, plainAnswers)
	}
}

func rawOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}
