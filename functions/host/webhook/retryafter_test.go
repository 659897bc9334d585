package webhook

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		h    string
		want time.Time
		ok   bool
	}{
		{"30", now.Add(30 * time.Second), true},
		{" 0 ", now, true},
		{now.Add(2 * time.Minute).Format(http.TimeFormat), now.Add(2 * time.Minute), true},
		{"Tuesday, 01-Dec-26 12:05:00 GMT", now.Add(5 * time.Minute), true}, // RFC 850
		{"999999999", now.Add(24 * time.Hour), true},                        // capped
		{now.Add(72 * time.Hour).Format(http.TimeFormat), now.Add(24 * time.Hour), true},
		{"", time.Time{}, false},
		{"-5", time.Time{}, false},
		{"soon", time.Time{}, false},
		// An HTTP-date is in GMT, to the second (RFC 9110 §5.6.7): any
		// other zone or a fractional second is malformed, ignored.
		{"Tuesday, 01-Dec-26 12:05:00 PST", time.Time{}, false},
		{"Tuesday, 01-Dec-26 12:05:00 UTC", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:05:00.5 GMT", time.Time{}, false},
		{"1.5", time.Time{}, false},
	}
	for _, c := range cases {
		got, ok := retryAfter(c.h, now)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("Retry-After %q: %s %v, want %s %v", c.h, got, ok, c.want, c.ok)
		}
	}
}
