package settings

import (
	"errors"
	"github.com/idemkit/idemkit/idem/idemenv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// LoadEnv reports every bad variable at once in one error that matches
// ErrConfig, and wraps Layer 1's error instead of flattening it:
// errors.Is(err, idem.ErrConfig) and errors.As to *idem.ConfigError hold.
func TestLoadEnvWrapsLayer1ConfigError(t *testing.T) {
	_, err := LoadEnv(Values(map[string]string{idemenv.Policy: "nope", EnvStreamMaxRetries: "-1"}))
	if err == nil || !errors.Is(err, ErrConfig) || !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("LoadEnv = %v (errors.Is settings.ErrConfig: %v, idem.ErrConfig: %v)", err, errors.Is(err, ErrConfig), errors.Is(err, idem.ErrConfig))
	}
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Errorf("errors.As(*idem.ConfigError) = %v", ce)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "host: invalid environment: idem: invalid config: ") || !strings.Contains(msg, EnvStreamMaxRetries) {
		t.Errorf("LoadEnv error %q: want both problems, Layer 1's first", msg)
	}
	if err := (Env{}).Require(EnvRunsTable, EnvEffectsTable); err == nil || err.Error() != "host: missing environment: RUNS_TABLE, EFFECTS_TABLE" || !errors.Is(err, ErrConfig) {
		t.Errorf("Require = %v (errors.Is ErrConfig: %v)", err, errors.Is(err, ErrConfig))
	}
}
