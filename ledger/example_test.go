package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"strings"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
	"github.com/idemkit/idemkit/ledger/semantic"
)

// A refund keyed on its business identity: the workflow node, a retry of the
// node, and a second run reaching the same refund all resolve to one effect,
// which fires once.
func ExampleLedger_Do() {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-123/refund-1"})

	fired := 0
	refund := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		fired++ // here: POST /refunds with "Idempotency-Key: " + c.ProviderKey
		return []byte("re_42"), nil
	}
	ctx := context.Background()
	first, _ := l.Do(ctx, ledger.Effect{Identity: id, RunID: "acme/run-0000000000000001", NodeID: "refund"}, refund)
	retry, _ := l.Do(ctx, ledger.Effect{Identity: id, RunID: "acme/run-0000000000000001", NodeID: "refund"}, refund)
	other, _ := l.Do(ctx, ledger.Effect{Identity: id, RunID: "acme/run-0000000000000002", NodeID: "compensate"}, refund)

	fmt.Println(string(first.Value), first.Replayed)
	fmt.Println(string(retry.Value), retry.Replayed)
	fmt.Println(string(other.Value), other.Replayed)
	fmt.Println("fired:", fired)
	// Output:
	// re_42 false
	// re_42 true
	// re_42 true
	// fired: 1
}

// The activity recipe for an LLM call: each logical call of a node has its
// own ordinal; the semantic request digest guards the identity against a
// different request being answered with this one's outcome.
func Example_activityIdentity() {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	run := "acme/run-0000000000000001"
	req := semantic.Request{Provider: "example", Model: "model-1",
		Messages: []semantic.Message{{Role: "user", Content: "hello"}}}
	digest, _ := semantic.DigestV2(req)
	id, _ := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: run, NodeID: "summarise", Ordinal: 0, Provider: "example"})
	eff := ledger.Effect{Identity: id, RunID: run, NodeID: "summarise", RequestDigest: digest, SemanticRecipe: semantic.RecipeV2}

	call := func(ctx context.Context, c ledger.Call) ([]byte, error) { return []byte("Hi!"), nil }
	r, _ := l.Do(context.Background(), eff, call)
	fmt.Println(string(r.Value), r.Attempt)

	seven := int64(7)
	req.Seed = &seven // a different request under the same identity
	eff.RequestDigest, _ = semantic.DigestV2(req)
	_, err := l.Do(context.Background(), eff, call)
	fmt.Println(errors.Is(err, ledger.ErrMismatch))
	// Output:
	// Hi! 1
	// true
}

// A scheduled job's slot fires once, and is not released when the job fails.
func ExampleLedger_FireOnce() {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	slot := identity.Slot{Job: "nightly-report", Slot: time.Date(2026, 9, 18, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)}
	job := func(context.Context) error { return errors.New("mail server down") }

	r1, err := l.FireOnce(context.Background(), slot, job)
	fmt.Println(r1.Fired, err)
	r2, err := l.FireOnce(context.Background(), slot, job)
	fmt.Println(r2.Fired, r2.OK, r2.Error, err)
	// Output:
	// true mail server down
	// false false mail server down <nil>
}

// One refund reached by two runs: it fires once, and with WitnessDuplicates
// both runs' witnesses (GET /runs/{runId}/effects) show the recorded effect,
// the same row, with no extra row for the suppressed duplicate.
func ExampleLedger_Witness() {
	l, _ := ledger.New(ledger.Config{Store: memstore.New(), WitnessDuplicates: true,
		Test: ledger.TestConfig{Clock: ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))}})
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-123/refund-1"})
	refund := func(ctx context.Context, c ledger.Call) ([]byte, error) { return []byte("re_42"), nil }
	ctx := context.Background()
	run1, run2 := "acme/run-0000000000000001", "acme/run-0000000000000002"
	_, _ = l.Do(ctx, ledger.Effect{Identity: id, RunID: run1, NodeID: "refund"}, refund)
	_, _ = l.Do(ctx, ledger.Effect{Identity: id, RunID: run2, NodeID: "compensate"}, refund)

	for _, run := range []string{run1, run2} {
		p, _ := l.Witness(ctx, run)
		for _, r := range p.Effects {
			fmt.Println(p.RunID, r.NodeID, r.Attempt, r.State, r.At)
		}
	}
	// Output:
	// acme/run-0000000000000001 refund 1 completed 2026-09-18T12:00:00Z
	// acme/run-0000000000000002 refund 1 completed 2026-09-18T12:00:00Z
}

// A streamed LLM response: the first call relays the stream to its client;
// the ledger records the request digest, the outcome and the body's size and
// SHA-256, never the body. A duplicate streams nothing and gets the metadata.
func ExampleLedger_DoStream() {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	run := "acme/run-0000000000000001"
	id, _ := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: run, NodeID: "chat", Ordinal: 0, Provider: "example"})
	digest, _ := semantic.DigestV2(semantic.Request{Provider: "example", Model: "model-1",
		Messages: []semantic.Message{{Role: "user", Content: "hello"}}})
	eff := ledger.Effect{Identity: id, RunID: run, NodeID: "chat", RequestDigest: digest, SemanticRecipe: semantic.RecipeV2}
	stream := func(ctx context.Context, c ledger.Call, w io.Writer) error {
		// here: POST /chat with "Idempotency-Key: " + c.ProviderKey, copying the SSE body to w
		_, err := io.WriteString(w, "data: Hi!\n\ndata: [DONE]\n\n")
		return err
	}
	var client1, client2 strings.Builder
	first, _ := l.DoStream(context.Background(), eff, &client1, stream)
	dup, _ := l.DoStream(context.Background(), eff, &client2, stream)
	fmt.Printf("%q %d %v\n", client1.String(), first.BodySize, first.Replayed)
	fmt.Printf("%q %d %v %v\n", client2.String(), dup.BodySize, dup.Replayed, dup.BodyDigest == first.BodyDigest)
	// Output:
	// "data: Hi!\n\ndata: [DONE]\n\n" 25 false
	// "" 25 true true
}
