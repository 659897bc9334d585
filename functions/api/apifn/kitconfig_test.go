package apifn

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestConfigFromKitIsTheAPIFunctionsConfig: the one place the api
// function's Config is built (its main and `idemkit dev` call it) takes
// the stores, Layer 1 and Layer 2 and the logger from the kit and the
// webhook policy, posture, lag bound and long-poll cap from its settings, and leaves
// what only dev sets zero.
func TestConfigFromKitIsTheAPIFunctionsConfig(t *testing.T) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	k := &kit.Kit{Runs: runs.NewMemRuns(), Guard: g, Ledger: l, Logger: log, Env: settings.Env{
		Webhook:     webhook.WebhookPolicy{AllowLoopback: true},
		CrossRegion: settings.CrossRegionFenced, ReplicationLagBoundMs: 1500, PollMaxWait: 7 * time.Second,
	}}
	c := ConfigFromKit(k)
	if c.Runs != k.Runs || c.Guard != g || c.Ledger != l || c.Logger != log {
		t.Errorf("stores, Layer 1, Layer 2 or logger not the kit's: %+v", c)
	}
	if !c.Webhook.AllowLoopback || c.CrossRegion != settings.CrossRegionFenced || c.ReplicationLagBoundMs != 1500 || c.PollMaxWait != 7*time.Second {
		t.Errorf("settings not the kit's Env: webhook %+v, posture %q, lag bound %d, poll wait %v", c.Webhook, c.CrossRegion, c.ReplicationLagBoundMs, c.PollMaxWait)
	}
	if c.BaseURL != "" || c.ReplayFixtures || c.Test.ConformanceSeams {
		t.Errorf("dev-only fields set: BaseURL %q, ReplayFixtures %v, ConformanceSeams %v", c.BaseURL, c.ReplayFixtures, c.Test.ConformanceSeams)
	}
	if _, err := New(c); err != nil {
		t.Fatalf("New(ConfigFromKit(k)) = %v", err)
	}
	// Under fenced-effects the kit's Witness reads the local replica: the
	// api's witness is that one, not the home region's Ledger.
	w, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	k.Witness = w
	if c := ConfigFromKit(k); c.Ledger != w {
		t.Errorf("the api's witness is not the kit's Witness")
	}
}
