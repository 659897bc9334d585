package kit_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
)

// NewKit reports every missing table at once, in one error that matches
// ErrConfig and, through it, settings.ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := kit.NewKit(kit.Config{Env: settings.Env{}, Parts: kit.Parts{Runs: true, Ledger: true}})
	want := "kit: host: missing environment: RUNS_TABLE, EFFECTS_TABLE"
	if err == nil || err.Error() != want || !errors.Is(err, kit.ErrConfig) || !errors.Is(err, settings.ErrConfig) {
		t.Fatalf("NewKit = %v (errors.Is kit.ErrConfig: %v, settings.ErrConfig: %v), want %q",
			err, errors.Is(err, kit.ErrConfig), errors.Is(err, settings.ErrConfig), want)
	}
}
