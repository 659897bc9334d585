package kit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emf"
)

// A stack deployed with RunRetentionDays=20 under EffectRetentionDays=30
// (a pair the template cannot refuse: its rules compare text) starts and
// serves: the settings raise the run retention to 30 days, the api's runs
// stamp ended runs with it, and the cold start logs a configuration
// warning naming both settings and counts it for the
// configuration-warnings alarm. Before, LoadEnv refused the pair and the
// api and executor stopped at every cold start (RED_TEAM 546).
func TestRunRetentionBelowTheEffectRetentionStartsRaisedAndPages(t *testing.T) {
	env, err := settings.LoadEnv(settings.Values(map[string]string{
		settings.EnvRunsTable: "runs", "IDEMPOTENCY_TABLE": "idem",
		settings.EnvRunRetention: "20", "EFFECT_RETENTION_DAYS": "30"}))
	if err != nil {
		t.Fatalf("LoadEnv = %v, want the function to start", err)
	}
	k, err := NewKit(Config{Env: env, Parts: Parts{Runs: true, Guard: true}})
	if err != nil {
		t.Fatalf("NewKit = %v, want the api's parts built", err)
	}
	if dr, ok := k.Runs.(*runs.DynamoRuns); !ok || dr.Retention != 30*24*time.Hour {
		t.Fatalf("runs %T %+v, want DynamoRuns keeping ended runs 30 days", k.Runs, k.Runs)
	}
	var logs, metrics bytes.Buffer
	s := &Start{Name: "api", Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: emf.New(&metrics, "idemkit/test")}
	s.Warn(env.Warnings)
	if out := logs.String(); !strings.Contains(out, `"level":"WARN"`) || !strings.Contains(out, "RUN_RETENTION_DAYS=20 is below EFFECT_RETENTION_DAYS=30") ||
		!strings.Contains(out, "at least 30") {
		t.Fatalf("logged %q, want a warning naming both settings and the value to set", out)
	}
	var doc map[string]any
	if err := json.Unmarshal(metrics.Bytes(), &doc); err != nil || doc[MetricConfigurationWarnings] != 1.0 {
		t.Fatalf("metrics %q (%v), want %s 1", metrics.String(), err, MetricConfigurationWarnings)
	}
}
