package idem_test

import (
	"errors"
	"github.com/idemkit/idemkit/idem/canon"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/jcs"
)

// A JSON number that a double cannot hold exactly would collapse with its
// neighbours in the RFC 8785 digest: such a body is 400 validation_error
// naming the member, and nothing is claimed or cached, on every adapter.
func TestInexactNumbersAreValidationError(t *testing.T) {
	reg := registry(t)
	for _, c := range []struct{ body, member string }{
		{`{"amount":12345678901234567890}`, "/amount"},
		{`{"amount":12345678901234567891}`, "/amount"},
		{`{"amount":0.10000000000000000001}`, "/amount"},
		{`{"amount":1152921504606846976}`, "/amount"}, // 2^60 is a double, but JCS writes 1152921504606847000
		{`{"order":{"lines":[{"qty":1},{"price":1e-400}]}}`, "/order/lines/1/price"},
		{`[1, 9007199254740993]`, "/1"},
		{`{"a/b~c":123456789012345678901234567890}`, "/a~1b~0c"},
		{`99999999999999999`, ""},
	} {
		for _, a := range refundAdapters {
			t.Run(a.name+" "+c.body, func(t *testing.T) {
				e := refundEnv(t, nil)
				got := a.send(t, e, refundReq{id: "1", body: c.body})
				details := checkEnvelope(t, reg, got, 400, "validation_error")
				if details["field"] != c.member || !strings.Contains(got.body, "double") {
					t.Fatalf("details %v, message %s: want field %q", details, got.body, c.member)
				}
				if n := e.store.TotalCalls(); n != 0 || a.Calls(e) != 0 {
					t.Fatalf("store calls %d, handler calls %d: want none", n, a.Calls(e))
				}
			})
		}
	}
}

// Numbers that survive the double exactly are accepted, and equal numbers
// spelled differently still hash equal.
func TestExactNumbersAccepted(t *testing.T) {
	for _, pair := range [][2]string{
		{`{"a":1.0}`, `{"a":1}`},
		{`{"a":1e2}`, `{"a":100}`},
		{`{"a":0.1}`, `{"a":1E-1}`},
		{`{"a":-0}`, `{"a":0}`},
		{`{"a":12345678901234567000}`, `{"a":1.2345678901234567e19}`},
		{`{"a":9007199254740992}`, `{"a":9007199254740992.000}`},
		{`{"a":0e-99999999999999999999}`, `{"a":0}`},
	} {
		x, err := idem.DigestJSON([]byte(pair[0]), nil)
		if err != nil {
			t.Fatalf("%s: %v", pair[0], err)
		}
		y, err := idem.DigestJSON([]byte(pair[1]), nil)
		if err != nil || x != y {
			t.Fatalf("%s vs %s: %s %s %v", pair[0], pair[1], x, y, err)
		}
	}
	for _, body := range []string{`{"a":12345678901234567890}`, `{"a":0.10000000000000000001}`, `{"a":1e-400}`} {
		_, err := idem.DigestJSON([]byte(body), nil)
		if !errors.Is(err, idem.ErrInvalidJSON) || !errors.Is(err, jcs.ErrInexactNumber) {
			t.Fatalf("%s: err = %v, want ErrInvalidJSON and ErrInexactNumber", body, err)
		}
		_, err = idem.DigestJSON([]byte(body), &canon.Normalizer{Name: "n"})
		if !errors.Is(err, jcs.ErrInexactNumber) {
			t.Fatalf("%s with a normaliser: err = %v", body, err)
		}
	}
}
