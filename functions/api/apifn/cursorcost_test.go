package apifn

import (
	"math"
	"strings"
	"testing"
)

// TestCursorCostIsFlat: reading a cursor allocates nothing, however wide
// (10,000 digits, past 64 bits, or leading zeros before a small number):
// a value wider than int64 is past the end of every log without being
// parsed as a number or copied into an error. A sign, whitespace or
// anything but digits is malformed; leading zeros are the same number.
func TestCursorCostIsFlat(t *testing.T) {
	wide := strings.Repeat("9", 10_000)
	zeros := strings.Repeat("0", 10_000) + "42"
	for _, c := range []struct {
		in string
		n  int64
		ok bool
	}{
		{wide, math.MaxInt64, true},
		{zeros, 42, true},
		{strings.Repeat("0", 10_000), 0, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", math.MaxInt64, true},
		{"18446744073709551616", math.MaxInt64, true},
		{"007", 7, true},
		{"0", 0, true},
		{"", 0, false},
		{"+1", 0, false},
		{"-1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"١", 0, false}, // a digit, but not an ASCII one
	} {
		n, ok := parseCursor(c.in)
		if n != c.n || ok != c.ok {
			t.Errorf("parseCursor(%.24q) = %d, %t; want %d, %t", c.in, n, ok, c.n, c.ok)
		}
	}
	for _, s := range []string{wide, zeros, "9223372036854775808", "12345"} {
		if a := testing.AllocsPerRun(100, func() { parseCursor(s) }); a != 0 {
			t.Errorf("parseCursor of a %d-character cursor: %.0f allocations, want 0", len(s), a)
		}
	}
}
