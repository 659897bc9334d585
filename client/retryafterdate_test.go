package client

import (
	"testing"
	"time"
)

// Retry-After is delay-seconds (digits only) or an HTTP-date (RFC 9110
// §10.2.3, §5.6.7): IMF-fixdate or the obsolete rfc850-date and
// asctime-date, which a recipient must accept, all in GMT and case
// sensitive. A value outside that grammar (another time zone or a numeric
// offset, a fractional second, a lower-case "gmt", a one-digit day) is
// malformed and ignored (ok false): read with an offset of 0 it would be
// hours off. An rfc850-date's two-digit year more than 50 years ahead is
// the most recent past year with those digits.
func TestRetryAfterHTTPDateForms(t *testing.T) {
	now := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"Sun, 06 Dec 2026 14:01:30 GMT", 90 * time.Second, true},                                          // IMF-fixdate
		{"Sunday, 06-Dec-26 14:01:30 GMT", 90 * time.Second, true},                                         // rfc850-date
		{"Sun Dec  6 14:01:30 2026", 90 * time.Second, true},                                               // asctime-date
		{"Mon, 06 Dec 2026 14:01:30 GMT", 90 * time.Second, true},                                          // a wrong day name is still the date
		{"Thursday, 06-Dec-70 14:00:00 GMT", time.Date(2070, 12, 6, 14, 0, 0, 0, time.UTC).Sub(now), true}, // 2070, not 1970
		{"Friday, 06-Dec-80 14:00:00 GMT", 0, true},                                                        // 1980: 2080 is more than 50 years ahead
		{"Wednesday, 06-Dec-00 14:00:00 GMT", 0, true},                                                     // 2000
		{"Sun, 06 Dec 2026 14:01:30 PST", 0, false},                                                        // not GMT
		{"Sunday, 06-Dec-26 14:01:30 PST", 0, false},                                                       // not GMT
		{"Sunday, 06-Dec-26 14:01:30 UTC", 0, false},                                                       // not GMT
		{"Sunday, 06-Dec-26 14:01:30 GMT+3", 0, false},                                                     // not GMT
		{"Sun, 06 Dec 2026 14:01:30 +0100", 0, false},                                                      // numeric offset
		{"Sun, 06 Dec 2026 14:01:30.5 GMT", 0, false},                                                      // fractional second
		{"Sunday, 06-Dec-26 14:01:30.250 GMT", 0, false},                                                   // fractional second
		{"Sun Dec  6 14:01:30.5 2026", 0, false},                                                           // fractional second
		{"Sun, 06 Dec 2026 14:01:30 gmt", 0, false},                                                        // case sensitive
		{"Sun, 06 dec 2026 14:01:30 GMT", 0, false},                                                        // case sensitive
		{"sun, 06 Dec 2026 14:01:30 GMT", 0, false},                                                        // case sensitive
		{"Sun, 6 Dec 2026 14:01:30 GMT", 0, false},                                                         // day is 2DIGIT
		{"Sun Dec 06 14:01:30 2026", 0, false},                                                             // asctime's day is SP DIGIT
		{"Sun, 06 Dec 2026 14:01:30 GMT trailing", 0, false},                                               // not a date
		{"1.5", 0, false}, {"0.5", 0, false}, {"2.0", 0, false}, // delay-seconds are digits only
	} {
		d, ok := RetryAfter(tc.in, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tc.in, d, ok, tc.want, tc.ok)
		}
	}
}
