package ledger_test

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/memstore"
	"github.com/idemkit/idemkit/ledger/semantic"
)

func TestEffectValidation(t *testing.T) {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: "k"})
	noop := func(context.Context, ledger.Call) ([]byte, error) { return nil, nil }
	bad := map[string]ledger.Effect{
		"run of another tenant":  {Identity: id, RunID: "globex/run-0000000000000001", NodeID: "n"},
		"run without node":       {Identity: id, RunID: "acme/run-0000000000000001"},
		"bad run grammar":        {Identity: id, RunID: "acme/short", NodeID: "n"},
		"bad node grammar":       {Identity: id, RunID: "acme/run-0000000000000001", NodeID: "a b"},
		"digest without recipe":  {Identity: id, RequestDigest: "abc"},
		"recipe without digest":  {Identity: id, SemanticRecipe: semantic.RecipeV2},
		"NUL in invocationId":    {Identity: id, InvocationID: "inv\x00"},
		"oversized invocationId": {Identity: id, InvocationID: strings.Repeat("i", 129)},
		"NUL in nodeId":          {Identity: id, NodeID: "n\x00"},
		"NUL in digest":          {Identity: id, RequestDigest: "ab\x00", SemanticRecipe: semantic.RecipeV2},
		"oversized digest":       {Identity: id, RequestDigest: strings.Repeat("a", 129), SemanticRecipe: semantic.RecipeV2},
		"NUL in recipe":          {Identity: id, RequestDigest: "ab", SemanticRecipe: "v2\x00"},
		"NUL in runId":           {Identity: id, RunID: "acme/run-000000000000000\x00", NodeID: "n"},
		"zero identity":          {},
		"effectId of another tenant": {Identity: func() identity.Identity {
			x := id
			x.Tenant = "globex"
			return x
		}()},
		"bad provider key": {Identity: func() identity.Identity {
			x := id
			x.ProviderKey = "short"
			return x
		}()},
		// A provider key in the key grammar that is not the effect's own
		// derivative: another effect's (the provider would suppress this
		// effect as that one's duplicate, or that one as this one's) or a
		// caller's Idempotency-Key (a caller's keyspace).
		"provider key of another effect": {Identity: func() identity.Identity {
			other, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: "other"})
			x := id
			x.ProviderKey = other.ProviderKey
			return x
		}()},
		"caller's key as provider key": {Identity: func() identity.Identity {
			x := id
			x.ProviderKey = "order-123-refund-0000000001"
			return x
		}()},
	}
	for name, eff := range bad {
		if _, err := l.Do(context.Background(), eff, noop); !errors.Is(err, ledger.ErrInvalidIdentity) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := l.Do(context.Background(), ledger.Effect{Identity: id}, nil); err == nil {
		t.Error("nil fn accepted")
	}
}

// Rows come from every attempt of the records a run created, including an
// attempt another run made on the same business identity; host slots and
// other runs' records are skipped.
func TestProject(t *testing.T) {
	at := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	run := "acme/run-0000000000000001"
	recs := []*ledger.Record{
		{Kind: identity.KindEffect, EffectID: "acme/bbbbbbbbbbbbbbbbbbbb", Keying: identity.KeyingBusinessIdentity, ProviderKey: "pk", RunID: run,
			Attempts: []ledger.Attempt{
				{N: 1, State: ledger.AttemptEscaped, At: at.Add(2 * time.Second), NodeID: "refund", RunID: run},
				{N: 2, State: ledger.AttemptCompleted, At: at.Add(3 * time.Second), RunID: "acme/run-0000000000000002", NodeID: "comp"},
				{N: 3, State: ledger.AttemptClaimed, At: at.Add(4 * time.Second)},
			}},
		{Kind: identity.KindEffect, EffectID: "acme/aaaaaaaaaaaaaaaaaaaa", Keying: identity.KeyingActivityRecipe, RunID: run,
			Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptCompleted, At: at, NodeID: "llm", InvocationID: "inv"}}},
		{Kind: identity.KindSlot, RunID: run, Attempts: []ledger.Attempt{{N: 1, At: at}}},
		{Kind: identity.KindEffect, EffectID: "acme/cccccccccccccccccccc", RunID: "acme/run-0000000000000009", Attempts: []ledger.Attempt{{N: 1, At: at}}},
	}
	p := ledger.Project(run, recs)
	if len(p.Effects) != 4 {
		t.Fatalf("%d rows: %+v", len(p.Effects), p.Effects)
	}
	if p.Effects[0].EffectID != "acme/aaaaaaaaaaaaaaaaaaaa" || p.Effects[0].InvocationID != "inv" || p.Effects[0].At != "2026-09-18T12:00:00Z" {
		t.Fatalf("row 0 %+v", p.Effects[0])
	}
	if p.Effects[3].NodeID != "refund" || p.Effects[2].NodeID != "comp" {
		t.Fatalf("node fallback: %+v", p.Effects)
	}
	if empty := ledger.Project(run, nil); empty.Effects == nil {
		t.Fatal("effects must be [] not null")
	}
}

// Project also keeps a record another run created when runID made an
// attempt at it, with all its attempts.
func TestProjectAttemptedByRun(t *testing.T) {
	at := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	runA, runB := "acme/run-000000000000000a", "acme/run-000000000000000b"
	rec := &ledger.Record{Kind: identity.KindEffect, EffectID: "acme/bbbbbbbbbbbbbbbbbbbb", Keying: identity.KeyingBusinessIdentity, RunID: runA,
		Attempts: []ledger.Attempt{
			{N: 1, State: ledger.AttemptReleased, At: at, RunID: runA, NodeID: "refund"},
			{N: 2, State: ledger.AttemptCompleted, At: at.Add(time.Second), RunID: runB, NodeID: "comp"},
		}}
	for _, run := range []string{runA, runB} {
		if p := ledger.Project(run, []*ledger.Record{rec}); len(p.Effects) != 2 || p.Effects[1].NodeID != "comp" {
			t.Fatalf("%s: %+v", run, p.Effects)
		}
	}
	if p := ledger.Project("acme/run-000000000000000c", []*ledger.Record{rec}); len(p.Effects) != 0 {
		t.Fatalf("unrelated run: %+v", p.Effects)
	}
}

// A host slot's fields are hashed with NUL separators too: NUL (and empty
// fields) are rejected, and shifting a byte across the boundary changes the
// key.
func TestSlotKeyFields(t *testing.T) {
	for _, s := range []identity.Slot{{Job: "a\x00b", Slot: "1"}, {Job: "a", Slot: "1\x00"}, {Job: "", Slot: "1"}, {Job: "a", Slot: ""}} {
		if _, err := s.Key(); !errors.Is(err, ledger.ErrInvalidIdentity) {
			t.Errorf("%q: %v", s, err)
		}
	}
	a, _ := identity.Slot{Job: "ab", Slot: "c"}.Key()
	b, _ := identity.Slot{Job: "a", Slot: "bc"}.Key()
	if a == b || !strings.HasPrefix(a, "host#") {
		t.Fatalf("slot keys %q %q", a, b)
	}
}

// An effect whose Retry has a negative value is refused with an error a
// caller can tell from a store's (errors.Is ErrConfig), and nothing fires.
func TestInvalidRetryIsAConfigError(t *testing.T) {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: "k"})
	fired := 0
	fn := func(context.Context, ledger.Call) ([]byte, error) { fired++; return nil, nil }
	for name, r := range map[string]ledger.Retry{
		"negative MaxAttempts": {MaxAttempts: -1},
		"negative Budget":      {Budget: -time.Second},
		"negative Base":        {Base: -time.Second},
		"negative Max":         {Max: -time.Second},
	} {
		r := r
		_, err := l.Do(context.Background(), ledger.Effect{Identity: id, Retry: &r}, fn)
		if !errors.Is(err, ledger.ErrConfig) {
			t.Errorf("%s: Do = %v, want an error matching ErrConfig", name, err)
		}
	}
	if fired != 0 {
		t.Errorf("fn ran %d times for invalid retries", fired)
	}
}
