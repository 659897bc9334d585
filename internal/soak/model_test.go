package soak

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const ms = int64(time.Millisecond)

// final is an answered attempt of key k with body b over [s, e] ms.
func final(k, b string, s, e int64, status int, run string, replayed bool) Attempt {
	return Attempt{Key: k, Body: b, Start: s * ms, End: e * ms, Answered: true, Status: status,
		Replayed: replayed, RunID: run, Answer: "a-" + run}
}

func answered(k, b string, s, e int64, status int, code string) Attempt {
	return Attempt{Key: k, Body: b, Start: s * ms, End: e * ms, Answered: true, Status: status, Code: code, Answer: code}
}

func lost(k, b string, s, gaveUp int64) Attempt {
	return Attempt{Key: k, Body: b, Start: s * ms, GaveUp: gaveUp * ms}
}

func TestCheckVerdicts(t *testing.T) {
	for _, c := range []struct {
		name string
		h    []Attempt
		want porcupine.CheckResult
	}{
		{"one execution, replays", []Attempt{
			final("k", "b", 0, 10, 201, "r1", false),
			final("k", "b", 20, 30, 201, "r1", true),
			final("k", "b", 40, 50, 201, "r1", true),
		}, porcupine.Ok},
		{"executed twice", []Attempt{
			final("k", "b", 0, 10, 201, "r1", false),
			final("k", "b", 20, 30, 201, "r2", false),
		}, porcupine.Illegal},
		{"a replay with another run id", []Attempt{
			final("k", "b", 0, 10, 201, "r1", false),
			final("k", "b", 20, 30, 201, "r2", true),
		}, porcupine.Illegal},
		{"a replay of nothing", []Attempt{
			final("k", "b", 0, 10, 201, "r1", true),
		}, porcupine.Illegal},
		{"concurrent duplicates: one executes, the other waits and replays", []Attempt{
			final("k", "b", 0, 30, 201, "r1", true),
			final("k", "b", 5, 20, 201, "r1", false),
		}, porcupine.Ok},
		{"in flight while another is open", []Attempt{
			final("k", "b", 0, 30, 201, "r1", false),
			answered("k", "b", 5, 10, 409, CodeInFlight),
		}, porcupine.Ok},
		{"in flight with nothing open", []Attempt{
			final("k", "b", 0, 10, 201, "r1", false),
			answered("k", "b", 20, 25, 409, CodeInFlight),
		}, porcupine.Illegal},
		{"in flight behind an abandoned claim", []Attempt{
			lost("k", "b", 0, 5),
			answered("k", "b", 20, 25, 409, CodeInFlight),
		}, porcupine.Ok},
		{"another body gets the mismatch", []Attempt{
			final("k", "b", 0, 10, 201, "r1", false),
			answered("k", "c", 20, 25, 409, CodeMismatch),
		}, porcupine.Ok},
		{"another body gets the replay", []Attempt{
			final("k", "b", 0, 10, 201, "r1", false),
			final("k", "c", 20, 25, 201, "r1", true),
		}, porcupine.Illegal},
		{"mismatch with nothing there", []Attempt{
			answered("k", "c", 20, 25, 409, CodeMismatch),
		}, porcupine.Illegal},
		{"a lost answer fixed by the first replay", []Attempt{
			lost("k", "b", 0, 5),
			final("k", "b", 100000, 100010, 201, "r9", true),
			final("k", "b", 100020, 100030, 201, "r9", true),
		}, porcupine.Ok},
		{"a lost attempt that never took effect, then an execution", []Attempt{
			lost("k", "b", 0, 5),
			final("k", "b", 100000, 100010, 201, "r1", false),
		}, porcupine.Ok},
		{"a 503 whose completion landed", []Attempt{
			answered("k", "b", 0, 10, 503, "idemkit.store_unavailable"),
			final("k", "b", 20, 30, 201, "r1", true),
		}, porcupine.Ok},
		{"a replayed 5xx", []Attempt{
			final("k", "b", 0, 10, 201, "r1", false),
			{Key: "k", Body: "b", Start: 20 * ms, End: 30 * ms, Answered: true, Status: 500, Code: "internal_error", Replayed: true},
		}, porcupine.Illegal},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := Check(c.h, Options{Horizon: time.Second})
			if rep.Verdict != c.want {
				t.Fatalf("%s, want %s\n%v", rep, c.want, rep.Explain)
			}
			if c.want == porcupine.Illegal && (len(rep.Illegal) != 1 || !strings.Contains(rep.Explain["k"], "body")) {
				t.Fatalf("illegal keys %v, explain %q", rep.Illegal, rep.Explain)
			}
		})
	}
}

// TestCheckKeysApart: an illegal key does not hide behind legal ones, and
// keys are checked apart (the same run id under two keys is not compared).
func TestCheckKeysApart(t *testing.T) {
	h := []Attempt{
		final("a", "b", 0, 10, 201, "r1", false),
		final("b", "b", 0, 10, 201, "r2", false),
		final("b", "b", 20, 30, 201, "r3", false),
	}
	rep := Check(h, Options{})
	if rep.Verdict != porcupine.Illegal || len(rep.Illegal) != 1 || rep.Illegal[0] != "b" || rep.Keys != 2 || rep.Attempts != 3 {
		t.Fatalf("%s %v", rep, rep.Illegal)
	}
}
