package idem

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/header"
)

// TestV2HeadersAbsentIsExact checks what lets codedBody and methodOverride
// skip their own pass over an HTTP API event's headers: v2Headers reports
// a header absent only when no name in the map matches it in any case, as
// header.Values matches names (strings.EqualFold, Unicode folding
// included), over the names API Gateway sends, every one of the headers
// in upper, lower and mixed case, names of their lengths that are none of
// them, names with bytes outside ASCII, and random names drawn from their
// letters and from characters that fold to ASCII letters.
func TestV2HeadersAbsentIsExact(t *testing.T) {
	rare := map[uint8][]string{
		rareEncoding: {"Content-Encoding"},
		rareOverride: methodOverrideHeaders[:],
	}
	check := func(h map[string]string) {
		t.Helper()
		_, _, _, absent := v2Headers(h, nil)
		for bit, names := range rare {
			var found bool
			for _, name := range names {
				found = found || len(header.Values(h, name)) > 0
			}
			if found && absent&bit != 0 {
				t.Fatalf("headers %q: bit %d reported absent, but present", keysOf(h), bit)
			}
			if !found && absent&bit == 0 && asciiNames(h) {
				t.Fatalf("headers %q: bit %d not reported absent for ASCII names, none present", keysOf(h), bit)
			}
		}
	}
	base := map[string]string{
		"content-type": "application/json", "idempotency-key": "k", "accept": "*/*",
		"x-forwarded-port": "443", "x-forwarded-proto": "https", "x-amzn-trace-id": "Root=1",
		"user-agent": "curl", "accept-encoding": "gzip", "content-length": "17", "x-forwarded-for": "1.2.3.4",
		"x-http-methods": "no", "content-encodinx": "no", "x-method-overridd": "no",
	}
	check(base)
	for _, name := range []string{"Content-Encoding", "content-encoding", "CONTENT-ENCODING", "cOnTeNt-EnCoDiNg",
		"X-Http-Method", "x-http-method", "X-HTTP-METHOD-OVERRIDE", "x-http-method-override", "x-method-override", "X-Method-Override"} {
		h := map[string]string{}
		for k, v := range base {
			h[k] = v
		}
		h[name] = "DELETE"
		check(h)
	}
	// Names with bytes outside ASCII: the Kelvin sign and the long s fold
	// to ASCII letters; none of these headers holds them, so any report
	// is allowed but a wrong "absent".
	check(map[string]string{"x-http-method-\u212Aey": "x", "content-encoding\u017F": "y", "é": "z"})
	r := rand.New(rand.NewPCG(1, 2))
	letters := []string{"c", "C", "o", "n", "t", "e", "E", "-", "d", "i", "g", "x", "X", "h", "p", "m", "M", "r", "v", "s", "k", "\u212A", "\u017F", "é"}
	for range 20000 {
		h := map[string]string{}
		for range 1 + r.IntN(4) {
			var b strings.Builder
			n := 10 + r.IntN(14)
			for range n {
				b.WriteString(letters[r.IntN(len(letters))])
			}
			h[b.String()] = "v"
		}
		if r.IntN(4) == 0 {
			names := append([]string{"Content-Encoding"}, methodOverrideHeaders[:]...)
			name := []byte(names[r.IntN(len(names))])
			for i := range name {
				if r.IntN(2) == 0 {
					name[i] ^= 0x20 * byte(btoi(name[i]|0x20 >= 'a' && name[i]|0x20 <= 'z'))
				}
			}
			h[string(name)] = "v"
		}
		check(h)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func keysOf(h map[string]string) []string {
	var ks []string
	for k := range h {
		ks = append(ks, k)
	}
	return ks
}

func asciiNames(h map[string]string) bool {
	for k := range h {
		for i := 0; i < len(k); i++ {
			if k[i] >= 0x80 {
				return false
			}
		}
	}
	return true
}

// TestV2HeadersSpellingsInOneOrder: an HTTP API event's header map holding
// Content-Type or Accept under two spellings gives v2Headers the value of
// the least spelling in byte order on every send, as header.First does,
// never the one Go's random map order meets first (RED_TEAM 382).
func TestV2HeadersSpellingsInOneOrder(t *testing.T) {
	h := map[string]string{"content-type": "text/plain", "Content-Type": "application/json", "accept": "text/html", "ACCEPT": "application/json", "x": "1"}
	for i := 0; i < 64; i++ {
		ct, accept, _, _ := v2Headers(h, nil)
		if ct != "application/json" || accept != "application/json" {
			t.Fatalf("send %d: Content-Type %q, Accept %q; want the values under Content-Type and ACCEPT", i, ct, accept)
		}
		if ct != header.First(h, "Content-Type") || accept != header.First(h, "Accept") {
			t.Fatalf("send %d: v2Headers and header.First disagree", i)
		}
	}
}
