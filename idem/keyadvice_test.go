package idem_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestKeyRefusalSaysWhatAKeyIs: a key refused for its length or its
// characters is answered with a message that says what the policy's
// grammar wants (the length range, the characters), so a caller who tried
// "order-1" learns what to send instead; details.reason is unchanged.
// Before: "The Idempotency-Key header is invalid (length)." and nothing
// else, for a grammar whose minimum, 22 characters, few callers guess
// (RED_TEAM 323).
func TestKeyRefusalSaysWhatAKeyIs(t *testing.T) {
	for _, c := range []struct {
		name, key, reason, want string
		mod                     func(*idem.Config)
	}{
		{"openwop, too short", "order-1", "length",
			"The Idempotency-Key header is invalid (length): use 22 to 128 characters of 0-9 A-Z a-z - . _ ~ (a UUID fits).", nil},
		{"openwop, a character outside", testKey + "/", "charset",
			"The Idempotency-Key header is invalid (charset): use 22 to 128 characters of 0-9 A-Z a-z - . _ ~ (a UUID fits).", nil},
		{"erp, too short", "wo-1", "length",
			"The Idempotency-Key header is invalid (length): use 8 to 128 characters of 0-9 A-Z a-z - . : _ (a UUID fits).", func(c *idem.Config) { c.Policy = erp.Policy }},
		// A grammar of UTF-8 text (RED_TEAM 336): before, "use 1 to 255
		// characters (a UUID fits)" for a key refused for a control
		// character, nothing on which characters.
		{"commerce, a control character", "order\x01", "charset",
			"The Idempotency-Key header is invalid (charset): use 1 to 255 characters of UTF-8 text without control characters (a UUID fits).", func(c *idem.Config) { c.Policy = commerce.Policy }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.mod)
			h := &handler{status: 201, body: `{}`}
			resp, err := e.guard.HTTPAPI(h.v2)(context.Background(), v2event("POST", "POST /runs", c.key, `{}`))
			if err != nil {
				t.Fatal(err)
			}
			var env struct {
				Message string         `json:"message"`
				Details map[string]any `json:"details"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &env); err != nil {
				t.Fatalf("%d %s: %v", resp.StatusCode, resp.Body, err)
			}
			if resp.StatusCode != 400 || env.Message != c.want || env.Details["reason"] != c.reason {
				t.Fatalf("%d %s\nwant 400, message %q, details.reason %q", resp.StatusCode, resp.Body, c.want, c.reason)
			}
		})
	}
}
