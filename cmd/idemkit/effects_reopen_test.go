package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
)

// fencedEscape is an escaped fenced effect on an emulator: its first
// attempt's token passed the fence and its answer was lost.
type fencedEscape struct {
	id    identity.Identity
	eff   ledger.Effect
	l     *ledger.Ledger
	owner *fence.Owner
	fs    *fencedynamo.Store
	calls *int
	fire  ledger.Func
	// cli runs idemkit with --endpoint and --table ($FENCE_TABLE names
	// the fence table).
	cli func(args ...string) (int, string, string)
}

func newFencedEscape(t *testing.T, e *dynamotest.Emulator, key string) fencedEscape {
	t.Helper()
	ctx := context.Background()
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	t.Setenv("IDEMKIT_OPERATOR", "ops@acme")
	table, fenceTable := e.CreateTable(t, "EffectsTable"), e.CreateTable(t, "FenceTable")
	t.Setenv(settings.EnvFenceTable, fenceTable)
	store, err := ledgerdynamo.New(ledgerdynamo.Config{Client: e.Client(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fencedynamo.New(fencedynamo.Config{Client: e.Client(), Table: fenceTable})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := fence.New(fence.Config{Store: fs})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: store, Fencer: owner, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key + "-" + e.Kind})
	f := fencedEscape{id: id, eff: ledger.Effect{Identity: id, RunID: "acme/run-0123456789reopen", NodeID: "charge"},
		l: l, owner: owner, fs: fs, calls: new(int)}
	f.fire = owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		*f.calls++
		return []byte("ok"), nil
	})
	if _, err := l.Do(ctx, f.eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout"))
	})); !errors.Is(err, ledger.ErrUncertain) {
		t.Fatalf("first attempt: %v", err)
	}
	f.cli = func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := run(ctx, append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errb := f.cli("effects", "show", id.EffectID); code != 0 || !strings.Contains(out, "escaped") {
		t.Fatalf("show: %d %q %q", code, out, errb)
	}
	return f
}

// inLibrarysWords reports whether a message a user reads carries a Go
// package's prefix or an error chain.
func inLibrarysWords(s string) bool {
	for _, w := range []string{"ledger: ", "fence: ", "fence/dynamostore", "dynamostore: ", "operation error", "injected by dynamotest: "} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// TestEffectsResolveFencePassedByAnotherTokenSaysWhatToDo: between
// `effects show` and `resolve --as not-delivered` of an escaped fenced
// effect, the fence forgets the escaped attempt's pass (another
// resolution's reopen, whose record write was lost) and another attempt's
// token passes it (another region's attempt, its claim not yet
// replicated here): the effect record is unchanged, so only the fence
// refuses the reopen. The refusal is one line in the CLI's words (the
// token that passed, that nothing was written, show it again, --as
// delivered if that attempt delivered it), exit 1; before it ended in
// "ledger: reopen the fence of …: fence: effect already passed its point
// of no return (token …)" (RED_TEAM 331).
func TestEffectsResolveFencePassedByAnotherTokenSaysWhatToDo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		f := newFencedEscape(t, e, "order-passed-by-another")
		it, err := f.fs.Get(ctx, f.id.EffectID)
		if err != nil || it == nil || it.Passed == nil {
			t.Fatalf("fence item: %+v, %v; want the escaped attempt's pass", it, err)
		}
		if ok, _, err := f.fs.Reopen(ctx, f.id.EffectID, it.Passed.Token); !ok || err != nil {
			t.Fatalf("reopen: %v %v", ok, err)
		}
		tok, err := f.owner.Token(ctx, f.id.EffectID)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.owner.Pass(ctx, f.id.EffectID, tok); err != nil {
			t.Fatal(err)
		}
		code, out, errb := f.cli("effects", "resolve", f.id.EffectID, "--as", "not-delivered")
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || inLibrarysWords(errb) ||
			!strings.Contains(errb, "refused: ") || !strings.Contains(errb, "another attempt") ||
			!strings.Contains(errb, "nothing written") || !strings.Contains(errb, "idemkit effects show "+f.id.EffectID) ||
			!strings.Contains(errb, "--as delivered") {
			t.Fatalf("resolve: exit %d, stdout %q, stderr %q; want 1 and one line in the CLI's words: another attempt passed, nothing written, show it again, --as delivered", code, out, errb)
		}
		if v, err := f.l.ShowEffect(ctx, f.id.EffectID); err != nil || v.State != ledger.EffectEscaped {
			t.Fatalf("after the refusal: %+v, %v; want it still escaped", v.State, err)
		}
	})
}

// TestEffectsResolveReopenAnswerLostSaysItWasReopened: the reopen of the
// fence is applied and its answer lost, and the SDK gives up (lost, then
// throttled): the resolution is not recorded, and the CLI reads the fence
// back and says, in its own words, that the fence was reopened and the
// same resolve records it; run again, it does, and the next attempt fires
// once. When the read back fails too, it says the reopen may have landed
// and to show the effect and run the same resolve again; never a plain
// failure in the library's words (RED_TEAM 332).
func TestEffectsResolveReopenAnswerLostSaysItWasReopened(t *testing.T) {
	for _, readBack := range []bool{true, false} {
		name := "read back"
		if !readBack {
			name = "read back fails"
		}
		t.Run(name, func(t *testing.T) {
			dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
				ctx := context.Background()
				key := "order-reopen-lost"
				if !readBack {
					key += "-unread"
				}
				f := newFencedEscape(t, e, key)
				faults := dynamotest.NewFaults()
				faults.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
				faults.FailNext("UpdateItem", 2, dynamotest.Throttle())
				if !readBack {
					// The fence's GetItem and the record's, then the read back.
					faults.PassNext("GetItem", 2)
					faults.FailNext("GetItem", 3, dynamotest.Throttle())
				}
				setEndpointClientOptions(t, dynamotest.FastRetries, faults.Middleware())
				code, out, errb := f.cli("effects", "resolve", f.id.EffectID, "--as", "not-delivered")
				setEndpointClientOptions(t)
				if faults.Pending() != 0 {
					t.Fatalf("faults pending %d", faults.Pending())
				}
				want := "was reopened for the escaped attempt"
				if !readBack {
					want = "may have been reopened"
				}
				if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || inLibrarysWords(errb) ||
					!strings.Contains(errb, want) || !strings.Contains(errb, "not recorded") ||
					!strings.Contains(errb, "idemkit effects resolve "+f.id.EffectID+" --as not-delivered") {
					t.Fatalf("resolve: exit %d, stdout %q, stderr %q; want 1 and one line saying %q, the resolution not recorded, and the command to run again", code, out, errb, want)
				}
				if !readBack && !strings.Contains(errb, "idemkit effects show "+f.id.EffectID) {
					t.Fatalf("stderr %q; want the show to check with", errb)
				}
				if v, err := f.l.ShowEffect(ctx, f.id.EffectID); err != nil || v.State != ledger.EffectEscaped {
					t.Fatalf("after the lost answer: %+v, %v; want it still escaped", v.State, err)
				}
				if code, out, errb := f.cli("effects", "resolve", f.id.EffectID, "--as", "not-delivered"); code != 0 ||
					!strings.Contains(out, "as not-delivered by ops@acme") {
					t.Fatalf("resolve again: %d %q %q", code, out, errb)
				}
				for range 2 {
					if _, err := f.l.Do(ctx, f.eff, f.fire); err != nil || *f.calls != 1 {
						t.Fatalf("after the resolution: %v, %d calls; want one", err, *f.calls)
					}
				}
			})
		})
	}
}

// setEndpointClientOptions makes the CLI's emulator clients carry opts
// (none: the default) until the test ends.
func setEndpointClientOptions(t *testing.T, opts ...func(*dynamodb.Options)) {
	t.Helper()
	endpointClientOptions.Store(&opts)
	t.Cleanup(func() { endpointClientOptions.Store(nil) })
}

// TestEffectsResolveRecordWriteFailedAfterReopenSaysWhatToDo: the fence is
// reopened, and writing the resolution then fails (throttled past the
// SDK's retries): one line in the CLI's words saying the fence was
// reopened, the record not written, the show to check and the command
// that records it, exit 1; before it printed the store's error joined
// with the library's ErrFenceReopened on a second line, "ledger: "
// prefixes and all (RED_TEAM 333).
func TestEffectsResolveRecordWriteFailedAfterReopenSaysWhatToDo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		f := newFencedEscape(t, e, "order-record-write-failed")
		faults := dynamotest.NewFaults()
		faults.FailNext("PutItem", 3, dynamotest.Throttle())
		setEndpointClientOptions(t, dynamotest.FastRetries, faults.Middleware())
		code, out, errb := f.cli("effects", "resolve", f.id.EffectID, "--as", "not-delivered")
		setEndpointClientOptions(t)
		if faults.Pending() != 0 {
			t.Fatalf("faults pending %d", faults.Pending())
		}
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || inLibrarysWords(errb) ||
			!strings.Contains(errb, "was reopened for the escaped attempt") || !strings.Contains(errb, "recording the resolution failed") ||
			!strings.Contains(errb, "idemkit effects show "+f.id.EffectID) ||
			!strings.Contains(errb, "idemkit effects resolve "+f.id.EffectID+" --as not-delivered") {
			t.Fatalf("resolve: exit %d, stdout %q, stderr %q; want 1 and one line: reopened, not recorded, the show to check, the command to run again", code, out, errb)
		}
		if code, out, errb := f.cli("effects", "resolve", f.id.EffectID, "--as", "not-delivered"); code != 0 ||
			!strings.Contains(out, "as not-delivered by ops@acme") {
			t.Fatalf("resolve again: %d %q %q", code, out, errb)
		}
		for range 2 {
			if _, err := f.l.Do(ctx, f.eff, f.fire); err != nil || *f.calls != 1 {
				t.Fatalf("after the resolution: %v, %d calls; want one", err, *f.calls)
			}
		}
	})
}
