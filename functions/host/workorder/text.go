package workorder

import (
	"strings"

	"github.com/idemkit/idemkit/idem/canon"
)

// The normalisation the work-order contract states, and nothing more (docs/POLICIES.md):
// surrounding white space is the four ASCII white-space characters JSON and
// XML share (space, tab, CR, LF); a project code is upper-cased by ASCII
// rules (a-z to A-Z), every other character kept as sent, so no Unicode
// case folding makes "ıd" (dotless i) or "ſku" (long s) equal "ID" or
// "SKU", and no other space (NBSP, U+3000) is trimmed.

// asciiSpace is the white space trimmed from the ends of every string.
const asciiSpace = " \t\r\n"

// trim removes surrounding ASCII white space (space, tab, CR, LF).
func trim(s string) string { return strings.Trim(s, asciiSpace) }

// upperASCII upper-cases the ASCII letters of s and keeps every other
// character as it is.
func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

// maxQuantityDigits bounds a quantity's digits so it fits an int on every platform.
const maxQuantityDigits = 9

// parseQuantity reads a quantity written as JSON writes an integer:
// -?(0|[1-9][0-9]*), at most nine digits; no sign '+', no leading zero, no
// fraction or exponent, so one quantity has one spelling in both formats.
func parseQuantity(field, s string) (int, error) {
	bad := &canon.ValidationError{Field: field, Message: "quantity must be an integer written as digits (no sign '+', leading zero, fraction or exponent)"}
	neg := strings.HasPrefix(s, "-")
	d := strings.TrimPrefix(s, "-")
	if d == "" || len(d) > 1 && d[0] == '0' || strings.Trim(d, "0123456789") != "" {
		return 0, bad
	}
	if len(d) > maxQuantityDigits {
		// Written right, too long: say so, not how to write it (RED_TEAM 482).
		return 0, &canon.ValidationError{Field: field, Message: "quantity must be at most nine digits (999999999)"}
	}
	n := 0
	for i := 0; i < len(d); i++ {
		n = n*10 + int(d[i]-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}
