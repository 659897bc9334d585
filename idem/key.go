package idem

import (
	"errors"
	"strings"
)

// HeaderKey is the request header carrying the caller's idempotency key.
const HeaderKey = "Idempotency-Key"

// KeyPolicy is a key grammar: a length range and an allowed byte set. A
// value outside the policy is answered 400 idempotency_key_invalid.
type KeyPolicy struct {
	// Name identifies the policy in errors and documentation.
	Name string
	// MinLen and MaxLen bound the key length in bytes (inclusive).
	MinLen, MaxLen int
	// allowed is a 256-entry table of allowed bytes.
	allowed *[256]bool
}

func byteSet(ranges ...string) *[256]bool {
	var t [256]bool
	for _, r := range ranges {
		if len(r) == 3 && r[1] == '-' {
			for c := int(r[0]); c <= int(r[2]); c++ {
				t[c] = true
			}
			continue
		}
		for i := 0; i < len(r); i++ {
			t[r[i]] = true
		}
	}
	return &t
}

var (
	// KeyOpenWOP is the OpenWOP v2 grammar (the OpenWOP default policy), the default:
	// ^[A-Za-z0-9._~-]{22,128}$.
	KeyOpenWOP = KeyPolicy{Name: "openwop", MinLen: 22, MaxLen: 128, allowed: byteSet("A-Z", "a-z", "0-9", "._~-")}
	// KeyERP is the ERP service's policy: 8..128 characters of A-Z a-z 0-9 . _ : -
	// (case-sensitive; leading or trailing whitespace rejected where the
	// adapter sees the raw header: API Gateway events, not net/http, whose
	// server trims it).
	KeyERP = KeyPolicy{Name: "erp", MinLen: 8, MaxLen: 128, allowed: byteSet("A-Z", "a-z", "0-9", "._:-")}
	// KeyCommerce is the commerce platform's policy: any string of 1..255 visible ASCII
	// characters except the comma (which would make a joined duplicate
	// header ambiguous).
	KeyCommerce = KeyPolicy{Name: "commerce", MinLen: 1, MaxLen: 255, allowed: func() *[256]bool {
		t := byteSet("!-~")
		t[','] = false
		return t
	}()}
)

// Key-rejection reasons, reported in KeyError.Reason and in the error
// envelope's details.reason.
const (
	ReasonMissing    = "missing"    // no key and the route requires one
	ReasonMultiple   = "multiple"   // more than one header, or a comma-joined value
	ReasonWhitespace = "whitespace" // leading or trailing whitespace
	ReasonLength     = "length"     // outside MinLen..MaxLen
	ReasonCharset    = "charset"    // a byte outside the allowed set
)

// ErrKeyInvalid is matched (errors.Is) by every *KeyError.
var ErrKeyInvalid = errors.New("idem: invalid Idempotency-Key")

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
	if p.allowed == nil {
		p = KeyOpenWOP
	}
	if strings.IndexByte(v, ',') >= 0 && !p.allowed[','] {
		return &KeyError{Reason: ReasonMultiple, Policy: p.Name}
	}
	if v != strings.TrimSpace(v) {
		return &KeyError{Reason: ReasonWhitespace, Policy: p.Name}
	}
	if len(v) < p.MinLen || len(v) > p.MaxLen {
		return &KeyError{Reason: ReasonLength, Policy: p.Name}
	}
	for i := 0; i < len(v); i++ {
		if !p.allowed[v[i]] {
			return &KeyError{Reason: ReasonCharset, Policy: p.Name}
		}
	}
	return nil
}

// ParseKey extracts the key from the values of every Idempotency-Key header
// the request carried (in any letter case). No value gives present == false.
// More than one value, or one comma-joined value (how proxies and API Gateway
// fold duplicate headers), is a *KeyError with ReasonMultiple. An empty value
// counts as a present, invalid key.
func ParseKey(values []string, p KeyPolicy) (key string, present bool, err error) {
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
