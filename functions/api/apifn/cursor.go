package apifn

import (
	"math"
	"strconv"
	"strings"
)

// maxCursor is math.MaxInt64 in decimal: the widest cursor read as the
// number it writes.
const maxCursor = "9223372036854775807"

// parseCursor reads an event cursor (poll's afterSequence, the stream's
// Last-Event-ID): a non-negative decimal integer of any width, digits
// only (leading zeros allowed: the same number). A value wider than int64
// is past the end of every log, so it reads as math.MaxInt64 (no event
// follows it) rather than being refused; ok is false for anything that is
// not digits (a sign, whitespace, an empty value). It allocates nothing,
// however wide the value: one pass over it, no big number, no copy.
func parseCursor(s string) (n int64, ok bool) {
	if !allDigits(s) {
		return 0, false
	}
	d := strings.TrimLeft(s, "0")
	if len(d) > len(maxCursor) || len(d) == len(maxCursor) && d > maxCursor {
		return math.MaxInt64, true // only digits: past every log, never malformed
	}
	if d == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(d, 10, 64)
	if err != nil { // unreachable: at most maxCursor, digits only
		return math.MaxInt64, true
	}
	return n, true
}

// parseBounded reads an integer query parameter with a range (poll's
// timeout, the stream's bufferMs) by parseCursor's rule: decimal digits
// only, leading zeros allowed (the same number); no sign, white space,
// fraction or exponent. ok is false for anything else and for a number
// outside lo..hi, however wide.
func parseBounded(s string, lo, hi int64) (n int64, ok bool) {
	n, ok = parseCursor(s)
	if !ok || n < lo || n > hi {
		return 0, false
	}
	return n, true
}
