package settings

import (
	"strings"
	"testing"
)

func TestLoadEnv(t *testing.T) {
	env := map[string]string{
		EnvRunsTable: "r", EnvEffectLease: "60", envEffectRetention: "30", EnvCrossRegion: "reconciled-records",
		envWebhookAllowlist: "a.com, *.b.com", EnvWebhookLoopback: "true", "IDEMPOTENCY_TABLE": "i", EnvStreamMaxRetries: "3",
	}
	e, err := LoadEnv(func(k string) string { return env[k] })
	if err != nil || e.EffectLease.Seconds() != 60 || e.EffectRetention.Hours() != 30*24 || e.CrossRegion != CrossRegionReconciled ||
		len(e.Webhook.Allow) != 2 || !e.Webhook.AllowLoopback || e.Idem.Table != "i" || !e.Transactional || e.MetricsNamespace != "idemkit" ||
		e.StreamMaxRetries != 3 {
		t.Fatalf("%+v %v", e, err)
	}
	if err := e.Require(EnvRunsTable, "IDEMPOTENCY_TABLE"); err != nil {
		t.Fatal(err)
	}
	if err := e.Require(EnvEffectsTable, EnvAPIKeysTable); err == nil || !strings.Contains(err.Error(), EnvAPIKeysTable) {
		t.Fatal(err)
	}
	if d, _ := LoadEnv(func(string) string { return "" }); d.StreamMaxRetries != 10 {
		t.Fatalf("default StreamMaxRetries %d, want the template's 10", d.StreamMaxRetries)
	}
	bad := map[string]string{EnvEffectLease: "0", envEffectRetention: "7", EnvCrossRegion: "strict", EnvWebhookLoopback: "maybe", "IDEMPOTENCY_PROCESSING_LEASE_SECONDS": "5",
		EnvStreamMaxRetries: "-1"}
	_, err = LoadEnv(func(k string) string { return bad[k] })
	for _, name := range []string{EnvEffectLease, envEffectRetention, EnvCrossRegion, EnvWebhookLoopback, "IDEMPOTENCY_PROCESSING_LEASE_SECONDS", EnvStreamMaxRetries} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s not reported: %v", name, err)
		}
	}
	if _, err := LoadEnv(func(k string) string { return map[string]string{EnvCrossRegion: "fenced-effects"}[k] }); err == nil {
		t.Fatal("fenced-effects without FENCE_TABLE accepted")
	}
}

func TestCapabilitiesDoc(t *testing.T) {
	if _, err := CapabilitiesDoc("strict"); err == nil {
		t.Fatal("bad posture accepted")
	}
	// multiRegion only under fenced-effects (Layer 1 home-pinned, effects
	// fenced): TestCapabilitiesPerConfiguration checks every posture.
	b, err := CapabilitiesDoc(CrossRegionFenced)
	if err != nil || !strings.Contains(string(b), `"crossRegion":"fenced-effects","multiRegion":{"partitionRecoveryStrategy":"x-host-idemkit-home-region-fence","replicationLagBoundMs":2000}`) {
		t.Fatal(string(b), err)
	}
	b, err = CapabilitiesDoc(CrossRegionReconciled)
	if err != nil || strings.Contains(string(b), "multiRegion") {
		t.Fatal(string(b), err)
	}
}
