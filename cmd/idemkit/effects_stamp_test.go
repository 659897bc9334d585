package main

import (
	"testing"
	"time"
)

// TestEffectsTextTimesHaveMilliseconds: the times `effects list` and
// `show` print in their columns carry three fraction digits, as the API's
// run documents do: a time on a tenth of a second, or on a whole second,
// is not printed shorter than its neighbours. Before, "01:36:11.87Z" sat
// under "01:35:30.155Z" (RED_TEAM 324).
func TestEffectsTextTimesHaveMilliseconds(t *testing.T) {
	for in, want := range map[time.Time]string{
		time.Date(2026, 12, 7, 1, 36, 11, 870_000_000, time.UTC):                    "2026-12-07T01:36:11.870Z",
		time.Date(2026, 12, 7, 1, 36, 11, 0, time.UTC):                              "2026-12-07T01:36:11.000Z",
		time.Date(2026, 12, 7, 2, 36, 11, 155_000_000, time.FixedZone("CET", 3600)): "2026-12-07T01:36:11.155Z",
		{}: "-",
	} {
		if got := stamp(in); got != want {
			t.Errorf("stamp(%v) = %q, want %q", in, got, want)
		}
	}
}
