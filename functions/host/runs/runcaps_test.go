package runs

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestCapsReadTheRunSection: the run section's bounds are read in any
// JSON spelling of an integer the create check admits; absent keys, other
// sections and no configurable read as zero; a runTimeoutMs past what a
// duration holds reads as a deadline no run reaches.
func TestCapsReadTheRunSection(t *testing.T) {
	for _, c := range []struct {
		conf string
		want Caps
	}{
		{``, Caps{}},
		{`{"version":1}`, Caps{}},
		{`{"version":1,"ai":{"maxTokens":5},"run":{"escalationThreshold":0.5}}`, Caps{}},
		{`{"version":1,"run":{"runTimeoutMs":1500,"maxLoopIterations":2,"recursionLimit":7}}`, Caps{RunTimeout: 1500 * time.Millisecond, MaxLoopIterations: 2, RecursionLimit: 7}},
		{`{"version":1,"run":{"runTimeoutMs":1e3,"maxLoopIterations":3.0}}`, Caps{RunTimeout: time.Second, MaxLoopIterations: 3}},
		{`{"version":1,"run":{"runTimeoutMs":1e30}}`, Caps{RunTimeout: time.Duration(maxCapMs) * time.Millisecond}},
	} {
		if got := (Options{Configurable: json.RawMessage(c.conf)}).Caps(); got != c.want {
			t.Errorf("Caps of %s = %+v, want %+v", c.conf, got, c.want)
		}
	}
}

// TestDeadlineIsCreatedAtPlusTheTimeout: to the millisecond the runs table
// keeps createdAt in, so a run reads the same deadline from every store.
func TestDeadlineIsCreatedAtPlusTheTimeout(t *testing.T) {
	created := time.Date(2026, 9, 18, 12, 0, 0, 1_500_000, time.UTC) // 12:00:00.0015
	r := NewRun("acme", "conformance-cancellable", nil, created)
	if !r.Deadline().IsZero() {
		t.Fatalf("a run without runTimeoutMs has deadline %v", r.Deadline())
	}
	r.Options.Configurable = json.RawMessage(`{"version":1,"run":{"runTimeoutMs":1000}}`)
	if want := time.Date(2026, 9, 18, 12, 0, 1, 1_000_000, time.UTC); !r.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v", r.Deadline(), want)
	}
}

// A run's caps come from its configurable's run section; its deadline is
// its creation time plus runTimeoutMs.
func ExampleOptions_Caps() {
	created := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	r := NewRun("acme", "conformance-cancellable", nil, created)
	r.Options.Configurable = json.RawMessage(`{"version":1,"run":{"runTimeoutMs":1500,"maxLoopIterations":3}}`)
	c := r.Options.Caps()
	fmt.Println(c.RunTimeout, c.MaxLoopIterations, c.RecursionLimit)
	fmt.Println(r.Deadline().Format(time.RFC3339Nano))
	// Output:
	// 1.5s 3 0
	// 2026-09-18T12:00:01.5Z
}
