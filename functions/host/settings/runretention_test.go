package settings

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// RUN_RETENTION_DAYS: unset or 0 keeps every run forever. A finite value
// below EFFECT_RETENTION_DAYS (a run must outlive its effects witness) or
// below the Layer-1 retention when that is finite (a run must outlive the
// record that created it) is raised to the larger of the two, in whole
// days, with a configuration warning naming both settings, and the
// function starts; a forever Layer-1 retention (commerce) is not compared.
// Before, such a value was refused at every cold start: the template
// cannot refuse the pair at deploy (its rules compare text), so a stack
// deployed with it served nothing (RED_TEAM 546).
func TestRunRetentionBelowAFloorServesRaisedAndWarns(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		name  string
		env   map[string]string
		want  time.Duration
		warns []string // substrings of the one warning; nil: none
		errs  []string // substrings of the error; nil: accepted
	}{
		{"unset keeps forever", nil, 0, nil, nil},
		{"0 keeps forever", map[string]string{EnvRunRetention: "0"}, 0, nil, nil},
		{"0 with the ERP policy", map[string]string{EnvRunRetention: "0", "IDEMPOTENCY_POLICY": "erp"}, 0, nil, nil},
		{"the effect retention", map[string]string{EnvRunRetention: "14"}, 14 * day, nil, nil},
		{"a year", map[string]string{EnvRunRetention: "365", "EFFECT_RETENTION_DAYS": "90"}, 365 * day, nil, nil},
		{"below the effect retention", map[string]string{EnvRunRetention: "13"}, 14 * day,
			[]string{"RUN_RETENTION_DAYS=13 is below EFFECT_RETENTION_DAYS=14", "kept 14 days", "at least 14"}, nil},
		{"below a longer effect retention", map[string]string{EnvRunRetention: "20", "EFFECT_RETENTION_DAYS": "30"}, 30 * day,
			[]string{"RUN_RETENTION_DAYS=20 is below EFFECT_RETENTION_DAYS=30", "kept 30 days"}, nil},
		{"below the ERP policy's 720 hours", map[string]string{EnvRunRetention: "20", "IDEMPOTENCY_POLICY": "erp"}, 30 * day,
			[]string{"RUN_RETENTION_DAYS=20 is below the Layer-1 retention (IDEMPOTENCY_RETENTION_HOURS, policy erp: 720 hours)", "at least 30"}, nil},
		{"the ERP policy's 720 hours", map[string]string{EnvRunRetention: "30", "IDEMPOTENCY_POLICY": "erp"}, 30 * day, nil, nil},
		{"below a Layer-1 retention in part of a day", map[string]string{EnvRunRetention: "31", "IDEMPOTENCY_RETENTION_HOURS": "745"}, 32 * day,
			[]string{"IDEMPOTENCY_RETENTION_HOURS", "745 hours", "at least 32", "kept 32 days"}, nil},
		{"both at once", map[string]string{EnvRunRetention: "1", "IDEMPOTENCY_RETENTION_HOURS": "48"}, 14 * day,
			[]string{"EFFECT_RETENTION_DAYS=14", "48 hours", "kept 14 days"}, nil},
		{"the Layer-1 retention the longer", map[string]string{EnvRunRetention: "15", "IDEMPOTENCY_RETENTION_HOURS": "1000"}, 42 * day,
			[]string{"1000 hours", "kept 42 days"}, nil},
		{"a forever Layer-1 retention is not compared", map[string]string{EnvRunRetention: "14", "IDEMPOTENCY_POLICY": "commerce"}, 14 * day, nil, nil},
		{"not a number", map[string]string{EnvRunRetention: "2w"}, 0, nil, []string{"RUN_RETENTION_DAYS=\"2w\"", "at least 0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := LoadEnv(Values(c.env))
			if c.errs == nil {
				if err != nil || e.RunRetention != c.want {
					t.Fatalf("RunRetention %v, %v; want %v accepted", e.RunRetention, err, c.want)
				}
				if c.warns == nil {
					if len(e.Warnings) != 0 {
						t.Fatalf("warnings %q, want none", e.Warnings)
					}
					return
				}
				if len(e.Warnings) != 1 {
					t.Fatalf("warnings %q, want one", e.Warnings)
				}
				for _, s := range c.warns {
					if !strings.Contains(e.Warnings[0], s) {
						t.Errorf("warning %q does not say %q", e.Warnings[0], s)
					}
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
