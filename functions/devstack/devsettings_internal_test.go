package devstack

import (
	"errors"
	"strings"
	"testing"

	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
)

// TestDevRefusesAWarning: a setting the functions only warn of (a
// WEBHOOK_ALLOWLIST entry that is no host: they keep serving, RED_TEAM
// 540) stops `idemkit dev` at start, naming it: a new start at a terminal
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
