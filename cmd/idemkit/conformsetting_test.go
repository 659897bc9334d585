package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestConformSettingRefusalNamesTheFlag: a configuration the checker
// refuses was said in its words, "idemkit conform: invalid setting: the
// body must be a JSON object", naming no flag (conform takes --body,
// --slow-body, --fail-body, --invalid-body, --test-body and five routes),
// against CLI.md's rule that a usage error names the flag (RED_TEAM 416).
// Now the line starts with the flag; exit 2, nothing on stdout, and no key
// quoted.
func TestConformSettingRefusalNamesTheFlag(t *testing.T) {
	const k1, k2, url = "idk_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "idk_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "http://127.0.0.1:9"
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--body", "[1]"}, "body"},
		{[]string{"--slow-body", "[1]"}, "slow-body"},
		{[]string{"--get", "/x"}, "get"},
		{[]string{"--route", "FOO"}, "route"},
		{[]string{"--route", "GET /x"}, "route"},
		{[]string{"--profile", "commerce", "--other-route", "POST /x"}, "other-route"},
		{[]string{"--profile", "erp", "--test-route", "FOO"}, "test-route"},
		{[]string{"--profile", "commerce", "--retry-route", "FOO"}, "retry-route"},
		{[]string{"--api-key", k1}, "api-key"},
		{[]string{"--api-key", k2, "--api-key", k2}, "api-key"},
		{[]string{"--profile", "commerce", "--scope-key", "bogus=" + k2}, "scope-key"},
		{[]string{"--profile", "erp", "--scope-key", "client=" + k1}, "scope-key"},
	} {
		args := append(append([]string{"conform", "--api-key", k1}, c.args...), url)
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		want := "idemkit conform: --" + c.flag + ": "
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], want) ||
			strings.Contains(errb.String(), k1) || strings.Contains(errb.String(), k2) {
			t.Errorf("idemkit %q: exit %d stdout %q stderr %q; want exit 2 and %q..., no key quoted", args, code, out.String(), errb.String(), want)
		}
	}
}
