package devstack

import (
	"strings"
	"testing"
)

// TestShownURLHidesPassword: the endpoint dev prints (its serving line,
// its log lines) never carries a password given in --dynamodb-endpoint or
// DYNAMODB_ENDPOINT (http://user:PASS@host), and still names the host
// (RED_TEAM 434).
func TestShownURLHidesPassword(t *testing.T) {
	for in, want := range map[string]string{
		"http://op:s3cretPW@127.0.0.1:8000":  "127.0.0.1:8000",
		"http://op@127.0.0.1:8000":           "http://op@127.0.0.1:8000",
		"http://127.0.0.1:8000":              "http://127.0.0.1:8000",
		"https://a:s3cretPW@dynamo.example/": "dynamo.example",
	} {
		got := shownURL(in)
		if strings.Contains(got, "s3cretPW") || !strings.Contains(got, want) {
			t.Errorf("shownURL(%q) = %q; want it to name %s without the password", in, got, want)
		}
	}
}
