package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestEffectsResolveFromCLI: an effect whose executor died after the fire
// mark is listed as escaped, shown, and resolved from the CLI; the
// resolution is fenced on what was shown, recorded with the operator, and
// visible in the witness.
func TestEffectsResolveFromCLI(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		store, table, cli := effectsCLI(t, e)
		past := time.Now().Add(-time.Hour)
		// An executor an hour ago: fired, then died (lease 1 minute).
		l0, err := ledger.New(ledger.Config{Store: store, Lease: time.Minute, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return past }}}})
		if err != nil {
			t.Fatal(err)
		}
		run := "acme/run-0123456789abcdef"
		id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-42-" + e.Kind})
		eff := ledger.Effect{Identity: id, RunID: run, NodeID: "charge"}
		func() {
			defer func() { _ = recover() }()
			_, _ = l0.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { panic("executor died") })
		}()
		code, out, errb := cli("effects", "list", "--state", "escaped", "--run", run)
		if code != 0 || !strings.Contains(out, id.EffectID) || !strings.Contains(out, "escaped") || !strings.Contains(out, "1 of 50") {
			t.Fatalf("list: %d %q %q", code, out, errb)
		}
		// Nothing found says where it looked (the wrong table or region
		// is the usual cause) and what it looked for: the run has an
		// effect, just no completed one, so "no effects" would be false.
		if code, out, _ := cli("effects", "list", "--state", "completed", "--run", run); code != 0 || !strings.Contains(out, "no completed effects of run "+run+" in table "+table+" in ") {
			t.Fatalf("empty list: %d %q", code, out)
		}
		if code, out, _ := cli("effects", "list", "--state", "failed"); code != 0 || !strings.Contains(out, "no failed effects in table "+table+" in ") {
			t.Fatalf("empty list by state: %d %q", code, out)
		}
		if code, _, errb := cli("effects", "show", "acme/unknown-effect-0123456789"); code != 1 || !strings.Contains(errb, "in table "+table+" in ") {
			t.Fatalf("unknown effect: %d %q", code, errb)
		}
		// A list cut at --limit says so.
		if code, _, errb := cli("effects", "list", "--limit", "-3"); code != 2 || !strings.Contains(errb, "--limit -3") {
			t.Fatalf("a negative --limit: %d %q", code, errb)
		}
		if code, _, errb := cli("effects", "list", "--limit", "1"); code != 0 || !strings.Contains(errb, "stopped at --limit 1") {
			t.Fatalf("list at its limit: %d %q", code, errb)
		}
		// Resolving unseen is refused: the resolution is fenced on a show,
		// and without one here the revision must be given (--rev): a usage
		// error saying where the revision comes from.
		if code, out, errb := cli("effects", "resolve", id.EffectID, "--as", "delivered"); code != 2 || out != "" ||
			!strings.Contains(errb, "--rev") || !strings.Contains(errb, "idemkit effects show "+id.EffectID) || strings.Count(errb, "\n") != 2 {
			t.Fatalf("unseen resolve: exit %d %q %q, want 2 and a usage error naming --rev and the show to run", code, out, errb)
		}
		code, out, errb = cli("effects", "show", id.EffectID)
		if code != 0 || !strings.Contains(out, "state:         escaped") || !strings.Contains(out, "rev:") {
			t.Fatalf("show: %d %q %q", code, out, errb)
		}
		// An id in its path-segment form is read and named canonically,
		// as resolve names it (RED_TEAM 266).
		other := id.EffectID[:len(id.EffectID)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(id.EffectID, "A")]
		if code, _, errb := cli("effects", "show", strings.Replace(other, "/", "~2F", 1)); code != 1 ||
			!strings.Contains(errb, "no effect "+other+" in ") || strings.Contains(errb, "~2F") {
			t.Fatalf("show of a missing effect in its path form: %d %q; want the canonical id %s named", code, errb, other)
		}
		// The effect changes after it was shown: refused.
		l1, err := ledger.New(ledger.Config{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l1.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("timeout"))
		}); !errors.Is(err, ledger.ErrUncertain) {
			t.Fatalf("second attempt: %v", err)
		}
		if code, _, errb := cli("effects", "resolve", id.EffectID, "--as", "delivered"); code != 1 || !strings.Contains(errb, "changed since it was shown") {
			t.Fatalf("stale resolve: %d %q", code, errb)
		}
		if code, _, errb := cli("effects", "resolve", id.EffectID, "--as", "maybe"); code != 2 {
			t.Fatalf("bad --as: %d %q", code, errb)
		}
		if code, _, errb := cli("effects", "show", id.EffectID, "--json"); code != 0 {
			t.Fatalf("show again: %q", errb)
		}
		code, out, errb = cli("effects", "resolve", id.EffectID, "--as", "not-delivered", "--note", "no charge in the provider console")
		if code != 0 || !strings.Contains(out, "resolved "+id.EffectID+" as not-delivered by ops@acme") || !strings.Contains(out, "attempt 4 with the same provider key") {
			t.Fatalf("resolve: %d %q %q", code, out, errb)
		}
		// The witness shows the operator's row; the next try fires with
		// the same provider key.
		var calls []string
		r, err := l1.Do(ctx, eff, func(_ context.Context, c ledger.Call) ([]byte, error) {
			calls = append(calls, c.ProviderKey)
			return []byte("ok"), nil
		})
		if err != nil || r.Replayed || len(calls) != 1 || calls[0] != id.ProviderKey {
			t.Fatalf("after not-delivered: %+v %v %v", r, err, calls)
		}
		code, out, _ = cli("effects", "show", id.EffectID, "--json")
		var v struct {
			State    string `json:"state"`
			Attempts []struct {
				State, Operator, Note, FiredAt string
			} `json:"attempts"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.State != "completed" || len(v.Attempts) != 4 {
			t.Fatalf("final: %q", out)
		}
		if a := v.Attempts[2]; a.Operator != "ops@acme" || a.Note != "no charge in the provider console" || a.FiredAt != "" || a.State != "released" {
			t.Fatalf("resolution row %+v", a)
		}
		p, err := l1.Witness(ctx, run)
		if err != nil || len(p.Effects) != 4 || p.Effects[2].Operator != "ops@acme" {
			t.Fatalf("witness %+v %v", p, err)
		}
		// A completed effect is not escaped: nothing to resolve.
		if code, _, errb := cli("effects", "resolve", id.EffectID, "--as", "delivered"); code != 1 || !strings.Contains(errb, "not escaped") {
			t.Fatalf("resolve completed: %d %q", code, errb)
		}
		// Help on every command, with examples.
		for _, c := range []string{"list", "show", "resolve"} {
			var out, errb bytes.Buffer
			code := run2(ctx, []string{"effects", c, "-h"}, &out, &errb)
			if code != 0 || !strings.Contains(out.String(), "example") || !strings.Contains(out.String(), "idemkit effects "+c) {
				t.Fatalf("%s -h: exit %d %q", c, code, out.String())
			}
		}
	})
}

// effectsCLI makes an EffectsTable on e and sets the operator's state
// directory and IDEMKIT_OPERATOR (ops@acme): the table's store, its name,
// and cli, which runs idemkit against it and returns the exit status,
// stdout and stderr.
func effectsCLI(t *testing.T, e *dynamotest.Emulator) (*ledgerdynamo.Store, string, func(args ...string) (int, string, string)) {
	t.Helper()
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	t.Setenv("IDEMKIT_OPERATOR", "ops@acme")
	table := e.CreateTable(t, "EffectsTable")
	store, err := ledgerdynamo.New(ledgerdynamo.Config{Client: e.Client(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return store, table, func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run2(context.Background(), append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
		return code, out.String(), errb.String()
	}
}

// run2 is run (the command dispatcher).
func run2(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
	return run(ctx, args, stdout, stderr)
}
