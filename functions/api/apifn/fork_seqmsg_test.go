package apifn

import (
	"strings"
	"testing"
)

// TestForkFromSeqRefusalSaysWhatIsWrong: a fromSeq that is not an integer
// (1.5, 2.25e0) is refused as not an integer, a negative one as negative,
// and only one past the largest sequence as out of range — never a
// fraction called "out of range", nor null (RED_TEAM 427); each names
// details.field fromSeq.
func TestForkFromSeqRefusalSaysWhatIsWrong(t *testing.T) {
	for in, want := range map[string]string{
		"1.5":              "must be an integer",
		"2.25e0":           "must be an integer",
		"0.5":              "must be an integer",
		"-1":               "non-negative",
		"-1.5":             "must be an integer",
		"9007199254740992": "out of range",
		"1e30":             "out of range",
		`"3"`:              "must be a non-negative integer",
		"null":             "must be a non-negative integer",
		"true":             "must be a non-negative integer",
		"[1]":              "must be a non-negative integer",
		"{}":               "must be a non-negative integer",
	} {
		_, e := parseFork([]byte(`{"mode":"replay","fromSeq":` + in + `}`))
		if e == nil || e.Status != 400 || e.Details["field"] != "fromSeq" || !strings.Contains(e.Message, want) {
			t.Errorf("fromSeq %s: %v, want a 400 saying %q", in, e, want)
			continue
		}
		if want != "out of range" && strings.Contains(e.Message, "out of range") {
			t.Errorf("fromSeq %s: %q", in, e.Message)
		}
	}
}

// TestForkModeRefusalSaysWhatIsWrong: a fork body without mode is told mode
// is required; one whose mode is given but is neither replay nor branch
// (another word, another case, another JSON type) is told what mode must
// be, never that it is missing, and without its value echoed (RED_TEAM
// 588). Each names details.field mode.
func TestForkModeRefusalSaysWhatIsWrong(t *testing.T) {
	const given = "mode must be replay or branch (the fork's mode, a JSON string)"
	for body, want := range map[string]string{
		`{}`:                         "mode is required: replay or branch",
		`{"fromSeq":1}`:              "mode is required: replay or branch",
		`{"mode":"nope"}`:            given,
		`{"mode":"Replay"}`:          given,
		`{"mode":""}`:                given,
		`{"mode":5}`:                 given,
		`{"mode":null}`:              given,
		`{"mode":["replay"]}`:        given,
		`{"mode":"x","fromSeq":"y"}`: given,
	} {
		_, e := parseFork([]byte(body))
		if e == nil || e.Status != 400 || e.Details["field"] != "mode" || e.Message != want {
			t.Errorf("%s: %v, want a 400 saying %q", body, e, want)
		}
	}
}
