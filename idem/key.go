package idem

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The names and values of the wire: the request headers the Guard reads,
// the OpenWOP default policy's replay header, Retry-After, the key-rejection reasons (KeyError.Reason and the error
// envelope's details.reason), the wait modes and idemkit's own error codes.
const (
	// HeaderKey is the request header carrying the caller's idempotency key.
	HeaderKey = "Idempotency-Key"

	// HeaderOpenWOPReplay marks a replay under the OpenWOP default policy
	// (the canonical form of OpenWOP-Idempotent-Replay).
	HeaderOpenWOPReplay = "Openwop-Idempotent-Replay"

	// HeaderRetryAfter is the header of the in-flight answer's poll interval.
	HeaderRetryAfter = "Retry-After"

	// Key-rejection reasons, reported in KeyError.Reason and in the error
	// envelope's details.reason.
	ReasonMissing    = "missing"    // no key and the route requires one
	ReasonMultiple   = "multiple"   // more than one header, or a comma-joined value
	ReasonWhitespace = "whitespace" // leading or trailing whitespace
	ReasonLength     = "length"     // outside MinLen..MaxLen
	ReasonCharset    = "charset"    // a byte outside the allowed set

	// The values of InFlightAnswer.ModeHeader.
	// ModeSync waits for a pending first request up to the call's budget.
	ModeSync = "sync"
	// ModeAsync is answered at once with the pending action (202).
	ModeAsync = "async"

	// Error codes the Guard answers with when the request itself is fine
	// but the server cannot serve it. The OpenWOP error registry has no code
	// for them, so they are idemkit's own (vendor codes, "idemkit." prefix).

	// CodeStoreUnavailable is the code of a 503 answered when the
	// idempotency store could not be used in time: it was throttled,
	// answered a 5xx, refused or dropped the connection, or did not answer
	// within the store call's bound (Config.StoreTimeout). The answer
	// carries Retry-After; retrying with the same Idempotency-Key is safe.
	CodeStoreUnavailable = "idemkit.store_unavailable"

	// CodeServerConfiguration is the code of a 500 answered when the Guard
	// is wired so that it cannot serve the request (no routed operation:
	// the handler is neither registered on a ServeMux pattern nor wraps a
	// ServeMux, and Config.HTTPOperation is unset). Retrying does not help;
	// the operator has to fix the configuration.
	CodeServerConfiguration = "idemkit.server_configuration_error"

	// CodeClientClosed is the code of the answer to a request whose client
	// hung up before the Guard could answer (the request's context was
	// cancelled, not timed out: that is CodeStoreUnavailable): status
	// StatusClientClosed, no Retry-After, never recorded. The store is not
	// blamed, and the key's record is released (or was never written), so
	// a retry with the same Idempotency-Key runs at once. The Guard counts
	// it (MetricClientCancelled) and logs it at info.
	CodeClientClosed = "idemkit.client_closed_request"
	// CodeRequestTimeout is the code of a 408 answered by the net/http
	// adapters when a request's body stopped arriving (the server's read
	// deadline ended the read): nothing was wrong with the body but that
	// it did not arrive, so the answer is no refusal of it. Never
	// recorded (net/http closes the connection); the same request sent
	// again runs.
	CodeRequestTimeout = "idemkit.request_timeout"
	// CodeResponseNotKept is the code of a 410 Gone answered to a
	// duplicate of a request that was processed, but whose response was
	// larger than MaxResponseBytes and so was not kept (Response.NotKept):
	// the handler never runs again for the key, and its answer cannot be
	// replayed. details carries the original "status" and the response's
	// "size" in bytes. 410 says what happened (the answer existed and is
	// gone for good) and is final: no Retry-After, and clients do not
	// retry a 4xx other than 409 in flight and 429, so a duplicate does not
	// loop. The answer carries the policy's replay headers.
	CodeResponseNotKept = "idemkit.response_not_kept"
	// StatusClientClosed is the HTTP status of CodeClientClosed: 499, the
	// "client closed request" status proxies log for a hang-up.
	StatusClientClosed = 499
)

// KeyPolicy is a key grammar: a length range and a predicate on the
// characters. A value outside it is answered 400 idempotency_key_invalid.
// Build one with a literal and Chars (or any predicate); KeyOpenWOP, erp.Key
// and commerce.Key are the presets' grammars.
type KeyPolicy struct {
	// Name identifies the grammar in errors (KeyError.Policy).
	Name string
	// MinLen and MaxLen bound the key length (inclusive), in bytes, or in
	// Unicode code points when Runes is set. 1 <= MinLen <= MaxLen.
	MinLen, MaxLen int
	// Runes makes the key a UTF-8 string: its length is counted in code
	// points, Allow sees each code point, and a value that is not valid
	// UTF-8 is rejected (ReasonCharset). When false, Allow sees each byte,
	// as a rune of that value (0..255): a character above U+007F that
	// Allow accepts then matches a single byte of that value, never the
	// character's UTF-8 encoding, so a grammar with such characters sets
	// Runes. Either way a key is compared byte for byte, without Unicode
	// normalisation: "é" precomposed (U+00E9) and decomposed (e, U+0301)
	// are two keys, two records.
	Runes bool
	// Allow reports whether a character may appear in a key. Required. A
	// comma that Allow rejects makes the value ReasonMultiple (a
	// comma-joined duplicate header); one it accepts is part of the key and
	// never splits it.
	Allow func(r rune) bool
}

// Chars returns an Allow predicate accepting the characters listed in
// specs: a spec of three characters whose middle one is '-' ("a-z") is the
// range of its ends (empty when the first comes after the last), any other
// spec lists its characters ("._~-"), so a three-character list holding
// '-' puts it first or last ("+/-", not "+-/", which is the range from '+'
// to '/', comma included). Ranges and lists may use any code point; one above
// U+007F matches a key's character only under KeyPolicy.Runes (without it
// Allow sees bytes).
func Chars(specs ...string) func(rune) bool {
	var ascii [128]bool
	type span struct{ lo, hi rune }
	var wide []span
	add := func(lo, hi rune) {
		for ; lo <= hi && lo < 128; lo++ {
			ascii[lo] = true
		}
		if hi >= 128 {
			wide = append(wide, span{max(lo, 128), hi})
		}
	}
	for _, s := range specs {
		rs := []rune(s)
		if len(rs) == 3 && rs[1] == '-' {
			add(rs[0], rs[2])
			continue
		}
		for _, r := range rs {
			add(r, r)
		}
	}
	return func(r rune) bool {
		if r >= 0 && r < 128 {
			return ascii[r]
		}
		for _, w := range wide {
			if r >= w.lo && r <= w.hi {
				return true
			}
		}
		return false
	}
}

// problems lists what is wrong with p, each starting with the field
// (".MaxLen ...").
func (p KeyPolicy) problems() []string {
	var out []string
	if p.Allow == nil {
		out = append(out, ".Allow is required (e.g. idem.Chars(\"A-Z\", \"a-z\", \"0-9\"))")
	}
	if p.MinLen < 1 {
		out = append(out, fmt.Sprintf(".MinLen %d must be >= 1", p.MinLen))
	}
	if p.MaxLen < p.MinLen {
		out = append(out, fmt.Sprintf(".MaxLen %d must be >= MinLen %d", p.MaxLen, p.MinLen))
	}
	return out
}

// KeyError is a rejected Idempotency-Key. It never contains the key itself.
type KeyError struct {
	Reason string // one of the Reason constants
	Policy string // KeyPolicy.Name
}

func (e *KeyError) Error() string {
	return "idem: invalid Idempotency-Key (" + e.Reason + ", policy " + e.Policy + ")"
}

// Is makes errors.Is(err, ErrKeyInvalid) true.
func (e *KeyError) Is(target error) bool { return target == ErrKeyInvalid }

// Validate checks one header value against the policy.
func (p KeyPolicy) Validate(v string) error {
	if p.Allow == nil {
		p = KeyOpenWOP
	}
	if strings.IndexByte(v, ',') >= 0 && !p.Allow(',') {
		return &KeyError{Reason: ReasonMultiple, Policy: p.Name}
	}
	if v != strings.TrimSpace(v) {
		return &KeyError{Reason: ReasonWhitespace, Policy: p.Name}
	}
	if p.Runes {
		if !utf8.ValidString(v) {
			return &KeyError{Reason: ReasonCharset, Policy: p.Name}
		}
		if n := utf8.RuneCountInString(v); n < p.MinLen || n > p.MaxLen {
			return &KeyError{Reason: ReasonLength, Policy: p.Name}
		}
		for _, r := range v {
			if !p.Allow(r) {
				return &KeyError{Reason: ReasonCharset, Policy: p.Name}
			}
		}
		return nil
	}
	if len(v) < p.MinLen || len(v) > p.MaxLen {
		return &KeyError{Reason: ReasonLength, Policy: p.Name}
	}
	for i := 0; i < len(v); i++ {
		if !p.Allow(rune(v[i])) {
			return &KeyError{Reason: ReasonCharset, Policy: p.Name}
		}
	}
	return nil
}

// parseKey extracts the key from the values of every Idempotency-Key header
// the request carried (in any letter case). No value gives present == false.
// More than one value, or one comma-joined value (how proxies and API Gateway
// fold duplicate headers), is a *KeyError with ReasonMultiple. An empty value
// counts as a present, invalid key.
func parseKey(values []string, p KeyPolicy) (key string, present bool, err error) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, &KeyError{Reason: ReasonMultiple, Policy: p.Name}
	}
	if err := p.Validate(values[0]); err != nil {
		return "", true, err
	}
	return values[0], true, nil
}

// advice says what p wants of a key, for the message of a key refused for
// its length or its characters (RED_TEAM 323): "use 22 to 128 characters
// of 0-9 A-Z a-z - . _ ~ (a UUID fits)". The characters are listed for a
// byte grammar: the runs of digits and letters Allow accepts, then each
// other printable ASCII character it accepts; a UTF-8 grammar is said to
// be text, without control characters where Allow refuses them all.
func (p KeyPolicy) advice() string {
	if p.Allow == nil {
		p = KeyOpenWOP
	}
	var b strings.Builder
	fmt.Fprintf(&b, "use %d to %d characters", p.MinLen, p.MaxLen)
	if !p.Runes {
		var parts []string
		for _, class := range [][2]rune{{'0', '9'}, {'A', 'Z'}, {'a', 'z'}} {
			for r := class[0]; r <= class[1]; r++ {
				if !p.Allow(r) {
					continue
				}
				end := r
				for end < class[1] && p.Allow(end+1) {
					end++
				}
				switch {
				case end-r >= 2:
					parts = append(parts, string(r)+"-"+string(end))
				case end > r:
					parts = append(parts, string(r), string(end))
				default:
					parts = append(parts, string(r))
				}
				r = end
			}
		}
		for r := rune('!'); r <= '~'; r++ {
			if p.Allow(r) && !('0' <= r && r <= '9' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z') {
				parts = append(parts, string(r))
			}
		}
		b.WriteString(" of ")
		b.WriteString(strings.Join(parts, " "))
	} else {
		// A UTF-8 grammar (RED_TEAM 336): text, and whether it refuses
		// the control characters (every one of ASCII's).
		b.WriteString(" of UTF-8 text")
		controls := true
		for r := rune(0); r < 0x80 && controls; r++ {
			if r < 0x20 || r == 0x7f {
				controls = !p.Allow(r)
			}
		}
		if controls {
			b.WriteString(" without control characters")
		}
	}
	const uuid = "123e4567-e89b-12d3-a456-426614174000"
	if p.Validate(uuid) == nil {
		b.WriteString(" (a UUID fits)")
	}
	return b.String()
}
