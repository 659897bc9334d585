package idem

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemkit/idemkit/idem/canon"
)

// TestNormalizedDigestRefusesInexactNumbers: a normaliser's output is
// canonicalised in the exact mode the body is, so a number it produces
// whose canonical form has another value (an integer beyond ±(2^53-1))
// is refused as invalid JSON, never hashed equal to its neighbour: two
// bodies a normaliser maps to different values never share a digest.
func TestNormalizedDigestRefusesInexactNumbers(t *testing.T) {
	n := &canon.Normalizer{Name: "amount-as-number", Func: func(v any) (any, error) {
		m := v.(map[string]any)
		m["amount"] = json.Number(m["amount"].(string)) // a string amount hashed as the number it spells
		return m, nil
	}}
	a, errA := digestJSON([]byte(`{"amount":"1152921504606846977"}`), n)
	b, errB := digestJSON([]byte(`{"amount":"1152921504606846976"}`), n)
	if !errors.Is(errA, ErrInvalidJSON) || !errors.Is(errB, ErrInvalidJSON) {
		t.Fatalf("digests %q (%v) and %q (%v); want both refused with ErrInvalidJSON (the normaliser's output is not exact)", a, errA, b, errB)
	}
	// A number a double holds is hashed as before.
	if d, err := digestJSON([]byte(`{"amount":"12.5"}`), n); err != nil || d == "" {
		t.Fatalf("exact amount: %q %v", d, err)
	}
	m := &canon.Normalizer{Name: "big-int", Func: func(any) (any, error) { return map[string]any{"n": int64(1<<60 + 1)}, nil }}
	if d, err := digestJSON([]byte(`{}`), m); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("int64 beyond 2^53 from the normaliser: %q %v; want ErrInvalidJSON", d, err)
	}
}
