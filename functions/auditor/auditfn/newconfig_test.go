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

// The write-backs follow the posture NewFromEnv runs the conflict audit
// under, read alike: a reconciled-records with surrounding space (a
// variable set by hand, or from an env file) audits conflicts and writes
// their winners back; the tables are trimmed as every function trims
// them. fenced-effects and single-region write nothing back.
func TestWriteBackTablesFollowThePosture(t *testing.T) {
	for _, c := range []struct {
		posture, table, effects string
		wantTable, wantEffects  string
	}{
		{"reconciled-records", "Idem", "Effects", "Idem", "Effects"},
		{" reconciled-records\n", " Idem ", "Effects\t", "Idem", "Effects"},
		{"reconciled-records", "", "Effects", "", "Effects"},
		{"fenced-effects", "Idem", "Effects", "", ""},
		{" fenced-effects ", "Idem", "Effects", "", ""},
		{"", "Idem", "Effects", "", ""},
		{"single-region", "Idem", "Effects", "", ""},
	} {
		getenv := settings.Values(map[string]string{settings.EnvCrossRegion: c.posture, EnvRegion: "eu-west-1",
			"IDEMPOTENCY_TABLE": c.table, settings.EnvEffectsTable: c.effects})
		a, err := NewFromEnv(getenv, nil, nil)
		if err != nil {
			t.Fatalf("CROSS_REGION=%q: %v", c.posture, err)
		}
		table, effects := WriteBackTables(getenv)
		if table != c.wantTable || effects != c.wantEffects {
			t.Errorf("CROSS_REGION=%q: WriteBackTables = %q, %q; want %q, %q", c.posture, table, effects, c.wantTable, c.wantEffects)
		}
		if (table != "" || effects != "") && a.Conflicts == nil {
			t.Errorf("CROSS_REGION=%q: write-backs without the conflict audit", c.posture)
		}
	}
}
