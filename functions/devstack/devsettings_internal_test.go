package devstack

import (
	"errors"
	"strings"
	"testing"

	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emulator"
)

// TestDevRefusesAWarning: a setting the functions only warn of (a
// WEBHOOK_ALLOWLIST entry that is no host: they keep serving, RED_TEAM
// 374) stops `idemkit dev` at start, naming it: a new start at a terminal
// is the place to say it.
func TestDevRefusesAWarning(t *testing.T) {
	_, err := devSettings(nil, map[string]string{"WEBHOOK_ALLOWLIST": "https://hooks.example.com"}, func(string) string { return "" })
	if err == nil || !errors.Is(err, hostsettings.ErrConfig) || !strings.Contains(err.Error(), "WEBHOOK_ALLOWLIST") {
		t.Fatalf("devSettings = %v, want an invalid setting naming WEBHOOK_ALLOWLIST", err)
	}
	if _, err := devSettings(nil, map[string]string{"WEBHOOK_ALLOWLIST": "hooks.example.com"}, func(string) string { return "" }); err != nil {
		t.Fatalf("devSettings of a host = %v", err)
	}
}

// TestDevFencedEffectsHomeIsItsEngine: `CROSS_REGION=fenced-effects
// idemkit dev` still starts now that the functions require
// FENCE_TABLE_REGION under fenced-effects (RED_TEAM 509): dev, one region,
// names its engine's region (the one its clients sign for) the home.
func TestDevFencedEffectsHomeIsItsEngine(t *testing.T) {
	getenv := func(k string) string {
		return map[string]string{hostsettings.EnvCrossRegion: hostsettings.CrossRegionFenced}[k]
	}
	if err := checkSettings("p-", nil, getenv); err != nil {
		t.Fatalf("CROSS_REGION=fenced-effects idemkit dev refused: %v", err)
	}
	env, err := devSettings(devOwn(map[string]string{"FenceTable": "p-FenceTable"}, "http://127.0.0.1"), nil, getenv)
	if err != nil || env.FenceTableRegion != emulator.Region || env.IdempotencyTableRegion != emulator.Region {
		t.Fatalf("fence region %q, Layer-1 region %q, %v; want both %s, dev's engine's region", env.FenceTableRegion, env.IdempotencyTableRegion, err, emulator.Region)
	}
}
