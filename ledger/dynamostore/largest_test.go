package dynamostore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/itemsize"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
)

// The largest record the ledger writes fits a DynamoDB item on every
// engine: the executor's MaxMaxAttempts attempts and the rows of the 50
// not-delivered resolutions a record keeps besides (an operator row with
// the longest operator and note, and the attempt it grants), every attempt
// by another run, each id of the longest its grammar allows (tenant,
// run, node, invocation), a failure message of the most a record keeps.
// It is written and read back whole, and its item stays well inside the
// 400 KB limit (about 349,000 bytes).
func TestLargestRecordFits(t *testing.T) {
	tenant := "anon:" + strings.Repeat("t", 128)
	id, err := identity.FromBusiness(identity.Business{Tenant: tenant, Operation: strings.Repeat("o", 64), Key: strings.Repeat("k", 128)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	rows := ledger.MaxMaxAttempts + 100
	r := &ledger.Record{Key: "effect#" + id.EffectID, Kind: identity.KindEffect, EffectID: id.EffectID, Tenant: tenant, Keying: id.Keying,
		IdentityRecipe: id.Recipe, ProviderKey: id.ProviderKey, RunID: tenant + "/" + strings.Repeat("r", 128),
		SemanticRecipe: strings.Repeat("s", 64), RequestDigest: strings.Repeat("d", 128), MaxAttempts: rows,
		State: ledger.StateCompleted, Outcome: &ledger.Outcome{Error: strings.Repeat("e", 1024)},
		Owner: "owner-token-0123456789", Attempt: rows, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ledger.MinRetention)}
	for i := 1; i <= rows; i++ {
		at := now.Add(time.Duration(i) * time.Second)
		a := ledger.Attempt{N: i, State: ledger.AttemptEscaped, At: at, Fired: true, FiredAt: at,
			RunID: fmt.Sprintf("%s/%0128d", tenant, i), NodeID: fmt.Sprintf("%0128d", i), InvocationID: fmt.Sprintf("i%0127d", i)}
		if i > ledger.MaxMaxAttempts && i%2 == 1 {
			a = ledger.Attempt{N: i, State: ledger.AttemptReleased, At: at, Operator: strings.Repeat("p", 128), Note: strings.Repeat("n", 512), RunID: a.RunID, NodeID: a.NodeID}
		}
		r.Attempts = append(r.Attempts, a)
	}
	r.Attempts[rows-1].State = ledger.AttemptCompleted
	av, err := dynamostore.EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	if n := itemsize.Of(av); n > 360_000 {
		t.Fatalf("the largest record is an item of %d bytes; want it well inside the 409,600 of DynamoDB's limit", n)
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		st := newStore(t, e.Client(), e.CreateTable(t, "EffectsTable"))
		ctx := context.Background()
		if won, _, err := st.Create(ctx, r, now); err != nil || !won {
			t.Fatalf("write of the largest record: won %v, %v", won, err)
		}
		got, err := st.Get(ctx, r.Key)
		if err != nil || got == nil || len(got.Attempts) != rows || got.Attempts[rows-2].Note != r.Attempts[rows-2].Note || got.Outcome.Error != r.Outcome.Error {
			t.Fatalf("read back: %v; want %d attempts, the notes and the failure", err, rows)
		}
	})
}
