package ledger_test

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"testing"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// TestReplayResolvesTheSourcesOrdinalAndNeverFires: a replay resolves the
// source run's n-th execution of a node from its record and calls nothing;
// an execution the source never completed fails closed.
func TestReplayResolvesTheSourcesOrdinalAndNeverFires(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	l, err := ledger.New(ledger.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	src := "acme/run-0000000000000001"
	ident := func(ordinal uint64) identity.Identity {
		id, err := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: src, NodeID: "effect", Ordinal: ordinal, Provider: "p"})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	fired := 0
	if _, err := l.Do(ctx, ledger.Effect{Identity: ident(0), RunID: src, NodeID: "effect"}, func(context.Context, ledger.Call) ([]byte, error) {
		fired++
		return []byte(`"first"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		_ = store.Scan(ctx, func(*ledger.Record) bool { n++; return true })
		return n
	}
	before := count()
	res, err := l.Replay(ctx, ident(0))
	if err != nil || !res.Replayed || string(res.Value) != `"first"` {
		t.Fatalf("Replay(n=1) = %+v, %v; want the recorded outcome", res, err)
	}
	_, err = l.Replay(ctx, ident(1))
	var missing *ledger.ReplaySourceMissingError
	if !errors.Is(err, ledger.ErrReplaySourceMissing) || !errors.As(err, &missing) || missing.EffectID != ident(1).EffectID {
		t.Fatalf("Replay(n=2) = %v; want replay source missing naming the second execution", err)
	}
	if fired != 1 || count() != before {
		t.Fatalf("fired %d times, records %d -> %d; Replay must neither fire nor write", fired, before, count())
	}
}

// TestReplayOfARecordedFailureIsTheFailure: a source execution that failed
// replays as that failure, never as a success.
func TestReplayOfARecordedFailureIsTheFailure(t *testing.T) {
	ctx := context.Background()
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: "k"})
	_, _ = l.Do(ctx, ledger.Effect{Identity: id}, func(context.Context, ledger.Call) ([]byte, error) { return nil, errors.New("declined") })
	if _, err := l.Replay(ctx, id); !errors.Is(err, ledger.ErrEffectFailed) {
		t.Fatalf("Replay of a failure = %v; want *FailedError", err)
	}
}
