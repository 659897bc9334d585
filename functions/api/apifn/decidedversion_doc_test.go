package apifn

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem/decided"
)

// TestDecidedVersionDocumentedAsAccepted: openapi.json describes exactly
// what the offline-decision headers accept. Idempotency-Decided-Version is
// the decimal version (its schema pattern accepts what
// decided.ParseVersion accepts, and the run's ETag is not one: the
// description sends it to If-Match instead of calling the version the
// ETag); If-Match is declared, with the ETag, on every operation that
// reads a decided version (cancelRun, pauseRun, resumeRun,
// resubmitInboxEntry). The refusal of
// an ETag sent as the version says where the ETag goes.
func TestDecidedVersionDocumentedAsAccepted(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	p := deref(t, doc, map[string]any{"$ref": "#/components/parameters/DecidedVersion"})
	schema, _ := p["schema"].(map[string]any)
	pat, _ := schema["pattern"].(string)
	re, err := regexp.Compile(pat)
	if pat == "" || err != nil {
		t.Fatalf("DecidedVersion has no usable pattern: %q %v", pat, err)
	}
	for _, v := range []string{"1", "7", "42", "999999999999999", "0", "07", "-1", "+1", "1.5", " 7", "7 ", "1000000000000000", `"7"`, `"2.oLkbkjj8P_ct"`, "2.oLkbkjj8P_ct", "W/\"7\"", "x"} {
		_, _, perr := decided.ParseVersion([]string{v})
		if re.MatchString(v) != (perr == nil) {
			t.Errorf("%q: the pattern says %v, the host accepts it %v", v, re.MatchString(v), perr == nil)
		}
	}
	desc, _ := p["description"].(string)
	if strings.Contains(desc, "The version (the ETag") || !strings.Contains(desc, "If-Match") || !strings.Contains(desc, "decimal") {
		t.Errorf("DecidedVersion description: %q", desc)
	}
	for _, k := range []string{"/runs/{runId}/cancel", "/runs/{runId}:pause", "/runs/{runId}:resume", "/inbox/{id}/resubmit"} {
		op := doc["paths"].(map[string]any)[k].(map[string]any)["post"].(map[string]any)
		var names []string
		for _, prm := range op["parameters"].([]any) {
			names = append(names, strings.ToLower(deref(t, doc, prm)["name"].(string)))
		}
		got := strings.Join(names, " ")
		if !strings.Contains(got, "if-match") || !strings.Contains(got, "idempotency-decided-version") {
			t.Errorf("POST %s declares %v, want If-Match and Idempotency-Decided-Version", k, names)
		}
	}
	_, _, perr := decided.Parse([]string{`"2.oLkbkjj8P_ct"`}, nil)
	_, _, body := decided.Invalid(perr)
	if !strings.Contains(string(body), "If-Match") {
		t.Errorf("an ETag sent as %s: %s", decided.Header, body)
	}
}
