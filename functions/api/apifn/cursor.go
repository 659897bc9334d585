package apifn

import (
	"math"
	"strconv"
)

// parseCursor reads an event cursor (poll's afterSequence, the stream's
// Last-Event-ID): a non-negative decimal integer of any width, digits
// only. A value wider than int64 is past the end of every log, so it reads
// as math.MaxInt64 (no event follows it) rather than being refused; ok is
// false for anything that is not digits.
func parseCursor(s string) (n int64, ok bool) {
	if !allDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return math.MaxInt64, true // only digits: out of range, never malformed
	}
	return n, true
}
