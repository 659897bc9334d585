package kit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emf"
)

// TestBootWarnsOfAnAllowlistEntryThatIsNoHost: the api and executor
// functions read WEBHOOK_ALLOWLIST at every cold start; an entry that is no
// host is logged as a warning under the function's name and the function
// starts (RED_TEAM 374: a start-up refusal would stop every route and every
// run of a stack upgraded with such an entry).
func TestBootWarnsOfAnAllowlistEntryThatIsNoHost(t *testing.T) {
	env, err := settings.LoadEnv(func(k string) string {
		return map[string]string{"WEBHOOK_ALLOWLIST": "https://hooks.example.com"}[k]
	})
	if err != nil {
		t.Fatalf("LoadEnv = %v, want the function to start", err)
	}
	var buf bytes.Buffer
	s := &Start{Name: "api", Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	s.Warn(env.Warnings)
	if out := buf.String(); !strings.Contains(out, `"level":"WARN"`) || !strings.Contains(out, `"msg":"api: configuration"`) ||
		!strings.Contains(out, "WEBHOOK_ALLOWLIST") || !strings.Contains(out, "hooks.example.com") {
		t.Fatalf("logged %q, want a warning naming the setting and its entry", out)
	}
}

// TestBootCountsConfigurationWarnings: the settings' warnings a cold start
// logs are counted in MetricConfigurationWarnings too (one per warning,
// no dimensions), which the configuration-warnings alarm watches, so an
// operator learns of a value that does not do what it says (a
// WEBHOOK_ALLOWLIST entry that is no host, edited into a function's
// environment by hand) without reading the log (RED_TEAM 381). A start
// without a warning writes nothing.
func TestBootCountsConfigurationWarnings(t *testing.T) {
	env, err := settings.LoadEnv(func(k string) string {
		return map[string]string{"WEBHOOK_ALLOWLIST": "https://hooks.example.com, hooks.example.org:443"}[k]
	})
	if err != nil || len(env.Warnings) != 2 {
		t.Fatalf("LoadEnv = %v, warnings %q; want two", err, env.Warnings)
	}
	var logs, metrics bytes.Buffer
	s := &Start{Name: "executor", Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: emf.New(&metrics, "idemkit/test")}
	s.Warn(env.Warnings)
	var doc map[string]any
	if err := json.Unmarshal(metrics.Bytes(), &doc); err != nil {
		t.Fatalf("metrics %q: %v, want one EMF line", metrics.String(), err)
	}
	if got, ok := doc[MetricConfigurationWarnings].(float64); !ok || got != 2 {
		t.Fatalf("metrics %q: %s = %v, want 2", metrics.String(), MetricConfigurationWarnings, doc[MetricConfigurationWarnings])
	}

	metrics.Reset()
	s.Warn(nil)
	if metrics.Len() != 0 {
		t.Fatalf("a start without a warning wrote %q, want nothing", metrics.String())
	}
}
