package main

import (
	"sort"
	"testing"
	"time"
)

// TestEffectsJSONTimesHaveAFixedWidth: --json writes every time with three
// fraction digits, as the text output and the run API do, so a script that
// compares or sorts the strings orders them as the times (RED_TEAM 441: a
// whole second was written "…:18Z" and sorted after "…:18.5Z"). The
// ledger keeps milliseconds, so three digits lose nothing.
func TestEffectsJSONTimesHaveAFixedWidth(t *testing.T) {
	base := time.Date(2026, 12, 7, 13, 26, 18, 0, time.FixedZone("CET", 3600))
	times := []time.Time{base, base.Add(130 * time.Millisecond), base.Add(500 * time.Millisecond), base.Add(time.Second)}
	var got []string
	for _, tm := range times {
		s := opt(tm)
		if len(s) != len("2026-12-07T12:26:18.000Z") || s[len(s)-1] != 'Z' {
			t.Fatalf("opt(%v) = %q, want UTC with three fraction digits", tm, s)
		}
		got = append(got, s)
	}
	if got[0] != "2026-12-07T12:26:18.000Z" || got[1] != "2026-12-07T12:26:18.130Z" {
		t.Fatalf("opt: %q", got)
	}
	if !sort.StringsAreSorted(got) {
		t.Fatalf("times in order do not sort in order as text: %q", got)
	}
	if opt(time.Time{}) != "" {
		t.Fatalf("a zero time is left out: %q", opt(time.Time{}))
	}
}
