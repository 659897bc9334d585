package runs

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

func TestRunIDProjection(t *testing.T) {
	for _, id := range []string{"acme/abcdefghijklmnop", "anon:x/abc-._defghijklmnop", "t.1/AAAAAAAAAAAAAAAAAAAAAA"} {
		p := ProjectID(id)
		if strings.ContainsAny(p, "/:") {
			t.Fatalf("%s projected to %s", id, p)
		}
		for _, raw := range [][]string{{p}, {strings.ReplaceAll(id, "/", "%2F")}, {strings.ReplaceAll(id, "/", "%2f")}, strings.SplitN(id, "/", 2)} {
			got, err := DecodePathID(raw...)
			if err != nil || got != id {
				t.Errorf("DecodePathID(%q) = %q, %v; want %q", raw, got, err, id)
			}
		}
	}
	if ProjectID("anon:a/b~c") != "anon~3Aa~2Fb~7Ec" {
		t.Fatal(ProjectID("anon:a/b~c"))
	}
	for _, bad := range []string{"acme~2", "acme~ZZabcdefghijklmnop", "acme~2Fshort", "acme", "acme%ZZ", "a~2Fb~2Fcccccccccccccccccc", "~2Fabcdefghijklmnop"} {
		if _, err := DecodePathID(bad); !errors.Is(err, ErrBadID) {
			t.Errorf("DecodePathID(%q): %v", bad, err)
		}
	}
	id := NewRunID("acme")
	if !ValidRunID(id) || RunTenant(id) != "acme" || strings.Contains(id[5:], "~") {
		t.Fatal(id)
	}
}

// TestRecipeStamps: a new run carries the kit's current recipe stamps
// (activity identity v2, semantic request v2), a run without them is never
// stored, and an item round trip keeps them. (The webhook effect's identity
// under the run's own stamp: webhook.TestWebhookIdentityUnderTheRunsStamp.)
func TestRecipeStamps(t *testing.T) {
	ctx := context.Background()
	r := NewRun("acme", "webhook", []byte(`{"url":"https://example.com/"}`), time.Now())
	if r.Stamps != identity.CurrentStamps() || r.ActivityIdentityRecipe != "openwop-activity-v2" ||
		r.SemanticRequestRecipe != "openwop-semantic-request-v2" || r.Status != StatusPending || RunTenant(r.ID) != "acme" {
		t.Fatalf("%+v", r)
	}
	// The JSON form carries the two stamps as run record members.
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"activityIdentityRecipe":"openwop-activity-v2"`) ||
		!strings.Contains(string(b), `"semanticRequestRecipe":"openwop-semantic-request-v2"`) {
		t.Fatal(string(b))
	}
	m := NewMemRuns()
	for _, bad := range []Run{
		func() Run { x := r; x.Stamps = identity.Stamps{}; return x }(),
		func() Run { x := r; x.SemanticRequestRecipe = ""; return x }(),
	} {
		if err := m.Create(ctx, bad); !errors.Is(err, ledger.ErrUnsupportedRecipe) {
			t.Fatalf("unstamped run stored: %v", err)
		}
	}
	if err := m.Create(ctx, Run{ID: "globex/abcdefghijklmnopqr", Tenant: "acme", Stamps: identity.CurrentStamps()}); err == nil {
		t.Fatal("a runId of another tenant was stored")
	}
	if m.Len() != 0 {
		t.Fatalf("%d runs stored", m.Len())
	}
	if err := m.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Get(ctx, r.ID)
	// A stream image / item round trip keeps the stamps.
	back, ok := RunFromItem(runItem(got))
	if !ok || back.Stamps != got.Stamps {
		t.Fatalf("%+v", back)
	}
}

// TestPercentFormOfARunIDHoldingATilde: the percent form of a runId (the
// id percent-encoded, `%2F` for its slash) and its split form (a front door
// decoded that `%2F`) are the id itself, so a `~` in them is the id's own,
// as a tenantId may hold one: `t~2Fx%2F…` is the run `t~2Fx/…`, never read
// as the projection `t/x/…` (400) nor `a~7Eb%2F…` as tenant `a~b` (403)
// (RED_TEAM 247). The projection still decodes every `~HH`.
func TestPercentFormOfARunIDHoldingATilde(t *testing.T) {
	for _, id := range []string{"t~2Fx/AAAAAAAAAAAAAAAAAAAAAA", "a~7Eb/AAAAAAAAAAAAAAAAAAAAAA", "~/AAAAAAAAAAAAAAAAAAAAAA", "t~/AAAAAAAAAAAAAAAAAAAAAA", "anon:t~3A/AAAAAAAAAAAAAAAAAAAAAA"} {
		for _, raw := range [][]string{{ProjectID(id)}, {strings.ReplaceAll(id, "/", "%2F")}, {strings.ReplaceAll(id, "/", "%2f")}, {strings.ReplaceAll(strings.ReplaceAll(id, "~", "%7E"), "/", "%2F")}, strings.SplitN(id, "/", 2)} {
			if got, err := DecodePathID(raw...); err != nil || got != id {
				t.Errorf("DecodePathID(%q) = %q, %v; want %q", raw, got, err, id)
			}
		}
	}
}
