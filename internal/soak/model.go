package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// input is what the model knows of a request besides its answer: its key
// and body, and whether, while it was open, another request under its key
// was open too or had been abandoned recently enough to hold the lease
// (Contended), and whether one of those had another body
// (ContendedOther). The flags come from the history's timing (contention),
// not from the system under test.
type input struct {
	Key, Body                 string
	Contended, ContendedOther bool
}

// record is the model's state: one idempotency record. Set is false while no
// final answer has been recorded. Wild is an answer recorded by a request
// whose answer nobody saw (no answer, or a 5xx after the completion
// landed): its status, answer and run id are fixed by the first replay
// that shows them.
type record struct {
	Set, Wild     bool
	Body          string
	Status        int
	Answer, RunID string
}

// step is the model's transition: the states the record may be in after a
// request with input in got answer out in state s; none when the answer is
// illegal there.
func step(s record, in input, out Attempt) []record {
	finalisedUnseen := record{Set: true, Wild: true, Body: in.Body}
	switch out.Kind() {
	case KindUnknown:
		if !s.Set {
			return []record{s, finalisedUnseen}
		}
		return []record{s}
	case KindTransient:
		if out.Replayed { // a server error is never recorded, so never replayed
			return nil
		}
		if !s.Set {
			return []record{s, finalisedUnseen}
		}
		return []record{s}
	case KindInFlight:
		if !s.Set && in.Contended {
			return []record{s}
		}
		return nil
	case KindMismatch:
		if (s.Set && s.Body != in.Body) || (!s.Set && in.ContendedOther) {
			return []record{s}
		}
		return nil
	default: // KindFinal
		seen := record{Set: true, Body: in.Body, Status: out.Status, Answer: out.Answer, RunID: out.RunID}
		switch {
		case !s.Set:
			if out.Replayed { // a replay of nothing
				return nil
			}
			return []record{seen}
		case s.Body != in.Body: // another body's answer
			return nil
		case !out.Replayed: // executed a second time
			return nil
		case s.Wild:
			return []record{seen}
		case s.Status == out.Status && s.Answer == out.Answer && s.RunID == out.RunID:
			return []record{s}
		default:
			return nil
		}
	}
}

// Model is the porcupine model of one idempotency record (see the package
// doc). Operations are partitioned by key.
func Model() porcupine.Model {
	nm := &porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				k := op.Input.(input).Key
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() []any { return []any{record{}} },
		Step: func(state, in, out any) []any {
			next := step(state.(record), in.(input), out.(Attempt))
			r := make([]any, len(next))
			for i, n := range next {
				r[i] = n
			}
			return r
		},
		Equal: func(a, b any) bool { return a.(record) == b.(record) },
		DescribeOperation: func(in, out any) string {
			a := out.(Attempt)
			if !a.Answered {
				return fmt.Sprintf("body %s → no answer", in.(input).Body)
			}
			return fmt.Sprintf("body %s → %d %s replayed=%t run=%s", in.(input).Body, a.Status, a.Code, a.Replayed, a.RunID)
		},
	}
	return nm.ToModel()
}

// Options configure Check.
type Options struct {
	// Horizon is how long after an abandoned request (no answer, or a
	// 5xx) gave up its claim may still be held: the lease plus the
	// server's request deadline. Default 60 s.
	Horizon time.Duration
	// Timeout bounds the checker's search per key; a key it cannot decide
	// in time is Unknown. Default 10 s.
	Timeout time.Duration
}

// Report is Check's verdict.
type Report struct {
	// Verdict is porcupine's: Ok when every key's history is linearizable,
	// Illegal when one is not, Unknown when the search timed out on one
	// (and none is Illegal).
	Verdict porcupine.CheckResult
	// Keys and Attempts count what was checked.
	Keys, Attempts int
	// Illegal and Undecided list the keys with those verdicts, and
	// Explain describes each illegal key's history.
	Illegal, Undecided []string
	Explain            map[string]string
}

// String is the report's one line.
func (r Report) String() string {
	return fmt.Sprintf("linearizability: %s (%d keys, %d attempts, %d illegal, %d unknown)",
		r.Verdict, r.Keys, r.Attempts, len(r.Illegal), len(r.Undecided))
}

// Check decides whether the history is linearizable, key by key.
func Check(h []Attempt, o Options) Report {
	if o.Horizon <= 0 {
		o.Horizon = 60 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	by := map[string][]Attempt{}
	for _, a := range h {
		by[a.Key] = append(by[a.Key], a)
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rep := Report{Verdict: porcupine.Ok, Keys: len(keys), Attempts: len(h), Explain: map[string]string{}}
	m := Model()
	for _, k := range keys {
		ops := operations(by[k], int64(o.Horizon))
		switch porcupine.CheckOperationsTimeout(m, ops, o.Timeout) {
		case porcupine.Illegal:
			rep.Illegal = append(rep.Illegal, k)
			rep.Explain[k] = describe(by[k])
			rep.Verdict = porcupine.Illegal
		case porcupine.Unknown:
			rep.Undecided = append(rep.Undecided, k)
			if rep.Verdict == porcupine.Ok {
				rep.Verdict = porcupine.Unknown
			}
		}
	}
	return rep
}

// gaveUp is when an attempt stopped waiting: its end, or for one without
// an answer its GaveUp mark (Start if unset).
func (a Attempt) gaveUp() int64 {
	if a.Answered {
		return a.End
	}
	if a.GaveUp > 0 {
		return a.GaveUp
	}
	return a.Start
}

// abandoned is an attempt that may have left a claim behind.
func (a Attempt) abandoned() bool {
	k := a.Kind()
	return k == KindUnknown || k == KindTransient
}

// operations turns one key's attempts into porcupine operations, with the
// contention flags computed from their timing.
func operations(as []Attempt, horizon int64) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(as))
	for i, a := range as {
		in := input{Key: a.Key, Body: a.Body}
		for j, b := range as {
			if i == j || b.Start >= a.End {
				continue
			}
			open := b.End > a.Start
			if b.abandoned() && b.gaveUp()+horizon > a.Start {
				open = true
			}
			if open {
				in.Contended = true
				if b.Body != a.Body {
					in.ContendedOther = true
				}
			}
		}
		ops[i] = porcupine.Operation{ClientId: a.Client, Input: in, Call: a.Start, Output: a, Return: a.End}
	}
	return ops
}

func describe(as []Attempt) string {
	sort.Slice(as, func(i, j int) bool { return as[i].Start < as[j].Start })
	var b strings.Builder
	for _, a := range as {
		end := "-"
		if a.Answered {
			end = time.Duration(a.End).String()
		}
		fmt.Fprintf(&b, "  [%v .. %s] body %s → ", time.Duration(a.Start), end, a.Body)
		if !a.Answered {
			b.WriteString("no answer\n")
			continue
		}
		fmt.Fprintf(&b, "%d %s replayed=%t run=%s answer=%s\n", a.Status, a.Code, a.Replayed, a.RunID, a.Answer)
	}
	return b.String()
}
