package settings

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// RUN_RETENTION_DAYS: unset or 0 keeps every run forever; a finite value
// is refused at start-up, naming both settings, when it is below
// EFFECT_RETENTION_DAYS (a run must outlive its effects witness) or below
// the Layer-1 retention when that is finite (a run must outlive the record
// that created it); a forever Layer-1 retention (commerce) is not compared.
func TestLoadEnvRunRetention(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		name string
		env  map[string]string
		want time.Duration
		errs []string // substrings of the error; nil: accepted
	}{
		{"unset keeps forever", nil, 0, nil},
		{"0 keeps forever", map[string]string{EnvRunRetention: "0"}, 0, nil},
		{"0 with the ERP policy", map[string]string{EnvRunRetention: "0", "IDEMPOTENCY_POLICY": "erp"}, 0, nil},
		{"the effect retention", map[string]string{EnvRunRetention: "14"}, 14 * day, nil},
		{"a year", map[string]string{EnvRunRetention: "365", "EFFECT_RETENTION_DAYS": "90"}, 365 * day, nil},
		{"below the effect retention", map[string]string{EnvRunRetention: "13"}, 0,
			[]string{"RUN_RETENTION_DAYS=13 is below EFFECT_RETENTION_DAYS=14", "at least 14"}},
		{"below a longer effect retention", map[string]string{EnvRunRetention: "20", "EFFECT_RETENTION_DAYS": "30"}, 0,
			[]string{"RUN_RETENTION_DAYS=20 is below EFFECT_RETENTION_DAYS=30"}},
		{"below the ERP policy's 720 hours", map[string]string{EnvRunRetention: "20", "IDEMPOTENCY_POLICY": "erp"}, 0,
			[]string{"RUN_RETENTION_DAYS=20 is below the Layer-1 retention (IDEMPOTENCY_RETENTION_HOURS, policy erp: 720 hours)", "at least 30"}},
		{"the ERP policy's 720 hours", map[string]string{EnvRunRetention: "30", "IDEMPOTENCY_POLICY": "erp"}, 30 * day, nil},
		{"below a Layer-1 retention in part of a day", map[string]string{EnvRunRetention: "31", "IDEMPOTENCY_RETENTION_HOURS": "745"}, 0,
			[]string{"IDEMPOTENCY_RETENTION_HOURS", "745 hours", "at least 32"}},
		{"both at once", map[string]string{EnvRunRetention: "1", "IDEMPOTENCY_RETENTION_HOURS": "48"}, 0,
			[]string{"EFFECT_RETENTION_DAYS=14", "48 hours"}},
		{"a forever Layer-1 retention is not compared", map[string]string{EnvRunRetention: "14", "IDEMPOTENCY_POLICY": "commerce"}, 14 * day, nil},
		{"not a number", map[string]string{EnvRunRetention: "2w"}, 0, []string{"RUN_RETENTION_DAYS=\"2w\"", "at least 0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := LoadEnv(Values(c.env))
			if c.errs == nil {
				if err != nil || e.RunRetention != c.want {
					t.Fatalf("RunRetention %v, %v; want %v accepted", e.RunRetention, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("%v, want an error matching ErrConfig", err)
			}
			for _, s := range c.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}
