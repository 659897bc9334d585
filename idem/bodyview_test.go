package idem_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// The Guard reads an API Gateway text body in place, without copying the
// event's string; the functions a route gives it (Contract.Decode,
// Route.DeriveKey) may write to the body they are handed, so they get a
// copy. Writing to the string's own bytes would change the event and, for
// a constant string (read-only memory), crash the process; these bodies
// are constants.
func TestUserFunctionsGetAWritableCopyOfTheBody(t *testing.T) {
	const body = `{"orderId":"ord-1","sku":"ab-1","qty":2}`
	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'x'
		}
	}
	t.Run("Contract.Decode", func(t *testing.T) {
		contract := &idem.Contract{Version: "v1", Decode: func(_ string, b []byte) (any, error) {
			var v map[string]any
			err := json.Unmarshal(b, &v)
			scribble(b)
			return v, err
		}}
		e := newEnv(t, func(c *idem.Config) {
			c.Routes = map[string]idem.Route{"POST /orders": {Contract: contract}}
		})
		h := &handler{}
		ev := v2event("POST", "POST /orders", testKey, body)
		first := e.call(h, ev)
		retry := e.call(h, ev)
		if first.StatusCode != 201 || retry.StatusCode != 201 || retry.Headers["Openwop-Idempotent-Replay"] != "true" || h.Calls() != 1 {
			t.Fatalf("first %d, retry %d %v, %d runs", first.StatusCode, retry.StatusCode, retry.Headers, h.Calls())
		}
		if ev.Body != body {
			t.Fatalf("the event's body changed: %q", ev.Body)
		}
	})
	t.Run("Route.DeriveKey", func(t *testing.T) {
		e := derivedEnv(t, func(b []byte, hdr func(string) []string) (string, error) {
			key, err := orderIDKey(b, hdr)
			scribble(b)
			return key, err
		})
		h := &handler{}
		ev := v2event(http.MethodPost, derivedRoute, "", body)
		first := e.call(h, ev)
		retry := e.call(h, ev)
		if first.StatusCode != 201 || retry.StatusCode != 201 || retry.Headers["Openwop-Idempotent-Replay"] != "true" || h.Calls() != 1 {
			t.Fatalf("first %d, retry %d %v, %d runs", first.StatusCode, retry.StatusCode, retry.Headers, h.Calls())
		}
		if ev.Body != body {
			t.Fatalf("the event's body changed: %q", ev.Body)
		}
	})
}
