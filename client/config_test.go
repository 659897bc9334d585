package client

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConfigReportsEveryProblem: like every other constructor, New names
// every problem of its Config in one error (matching ErrConfig), not only
// the first it finds.
func TestConfigReportsEveryProblem(t *testing.T) {
	cfg := Config{MaxAttempts: -1, MaxElapsed: -2, BaseDelay: -3, MaxDelay: -4}
	_, err := New(cfg)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("New(%+v) = %v, want an error matching ErrConfig", cfg, err)
	}
	for _, want := range []string{"MaxAttempts -1 < 0", "MaxElapsed -2ns < 0", "BaseDelay -3ns < 0", "MaxDelay -4ns < 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New error %q does not name %q", err, want)
		}
	}
	cfg = Config{MaxAttempts: -1, BaseDelay: time.Second, MaxDelay: time.Millisecond}
	err = cfg.Validate()
	for _, want := range []string{"MaxAttempts -1 < 0", "MaxDelay 1ms < BaseDelay 1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
}
