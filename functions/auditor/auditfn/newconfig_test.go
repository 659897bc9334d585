package auditfn

import (
	"errors"
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
)

// NewFromEnv's errors match ErrConfig, one problem per bad variable.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	for env, want := range map[string]string{
		"bogus":          `auditfn: CROSS_REGION="bogus": want single-region, reconciled-records or fenced-effects`,
		"fenced-effects": "auditfn: CROSS_REGION=fenced-effects needs AWS_REGION (the region whose stream is audited)",
	} {
		_, err := NewFromEnv(settings.Values(map[string]string{settings.EnvCrossRegion: env}), nil, nil)
		if err == nil || err.Error() != want || !errors.Is(err, ErrConfig) {
			t.Errorf("NewFromEnv(CROSS_REGION=%s) = %v (errors.Is ErrConfig: %v), want %q", env, err, errors.Is(err, ErrConfig), want)
		}
	}
}
