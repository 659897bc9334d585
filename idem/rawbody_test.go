package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/canon"
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
