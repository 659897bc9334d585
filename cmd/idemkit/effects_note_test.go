package main

import (
	"strings"
	"testing"
)

// TestEffectsResolveNoteRefusalSaysWhy: a --note refused for what it holds
// (a control character, such as the carriage return of a note pasted
// with Windows line breaks, or bytes that are not UTF-8) is told that,
// naming where, not "at most 512 bytes (got 9 bytes)", which it is; one
// too long is told its length (RED_TEAM 435).
func TestEffectsResolveNoteRefusalSaysWhy(t *testing.T) {
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	for _, c := range []struct {
		note, want, not string
	}{
		{"line 1\r\nline 2", `a control character (U+000D) at byte 6`, "got 14 bytes"},
		{"a\x01b", `a control character (U+0001) at byte 1`, "got 3 bytes"},
		{"seen\u0085there", `a control character (U+0085) at byte 4`, "got 11 bytes"},
		{"charge \xe2\x82 found", `not UTF-8 at byte 7`, "got 15 bytes"},
		{strings.Repeat("n", 513), "got 513 bytes", "control"},
	} {
		code, _, errb := resolveWith(t, "ops", []string{"--note", c.note})
		if code != 2 || !strings.Contains(errb.String(), "--note") || !strings.Contains(errb.String(), c.want) || strings.Contains(errb.String(), c.not) {
			t.Errorf("--note %q: exit %d stderr %q; want exit 2 saying %q, not %q", c.note, code, errb.String(), c.want, c.not)
		}
	}
}
