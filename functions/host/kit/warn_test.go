package kit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
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
