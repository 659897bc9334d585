package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

// `effects show --json` prints an effect as `show` prints it, its outcome
// included: a recorded failure with its message, a success as such. Before,
// the JSON had no outcome: a script reading it saw "failed" and never why.
func TestEffectsShowJSONCarriesTheOutcome(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		store, _, cli := effectsCLI(t, e)
		l, err := ledger.New(ledger.Config{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			key   string
			err   error
			state string
		}{{"order-declined-" + e.Kind, errors.New("card declined"), "failed"}, {"order-charged-" + e.Kind, nil, "completed"}} {
			id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: c.key})
			_, _ = l.Do(ctx, ledger.Effect{Identity: id}, func(context.Context, ledger.Call) ([]byte, error) { return []byte("ch_1"), c.err })
			code, out, errb := cli("effects", "show", id.EffectID, "--json")
			var v struct {
				State   string `json:"state"`
				Outcome *struct {
					OK    bool   `json:"ok"`
					Error string `json:"error"`
				} `json:"outcome"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.State != c.state {
				t.Fatalf("show --json: exit %d %q %q", code, out, errb)
			}
			if v.Outcome == nil || v.Outcome.OK != (c.err == nil) || (c.err != nil && v.Outcome.Error != c.err.Error()) {
				t.Fatalf("show --json of a %s effect: outcome %+v; want it as show prints it (%v)", c.state, v.Outcome, c.err)
			}
		}
	})
}
