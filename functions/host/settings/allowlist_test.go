package settings

import (
	"reflect"
	"strings"
	"testing"
)

// TestWebhookAllowlistEntriesAreHosts: an entry of WEBHOOK_ALLOWLIST that
// is not a host ("example.com"), a "*.domain" or an IP address — a URL, a
// host with a port or a path, an IPv6 address in brackets, a pattern other
// than a leading "*." — matches no destination. Before 362 it was kept
// silently, so the typo of one operator refused every tenant's webhook run
// while the stack looked healthy. It is said in Env.Warnings naming the
// setting and the entry, and LoadEnv does not fail (RED_TEAM 374): the api
// and executor functions read the setting at every cold start, and a
// refusal there would stop every route and every run of a stack upgraded
// with such an entry, where before only its webhook runs were refused. The
// entry is kept matching nothing, so the list admits no host it did not
// admit before (dropping it could leave the list empty: any public host).
// `idemkit dev` refuses to start with a warning (TestDevRefusesAWarning).
// Well-formed entries load as before, an absolute host's trailing dot
// aside (a destination is checked without it).
func TestWebhookAllowlistEntriesAreHosts(t *testing.T) {
	load := func(v string) (Env, error) {
		return LoadEnv(func(k string) string { return map[string]string{envWebhookAllowlist: v}[k] })
	}
	for _, bad := range []string{
		"https://hooks.example.com", "hooks.example.com:443", "hooks.example.com/path", "[", "[::1]",
		"*example.com", "hooks.*.example.com", "*", "*.", "a..b", "-a.example.com", "a b.example.com", "user@example.com",
		"hooks.example.com, https://other.example.com",
	} {
		e, err := load(bad)
		if err != nil {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: LoadEnv = %v, want no error (a warning)", bad, err)
		}
		if len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], envWebhookAllowlist) || !strings.Contains(e.Warnings[0], "matches no destination") {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: warnings %q, want one naming the setting", bad, e.Warnings)
		}
		if len(e.Webhook.Allow) == 0 {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: the list is empty (any public host admitted), want the entry kept", bad)
		}
		if e.Webhook.CheckURL("https://hooks.example.com/x") == nil && !strings.Contains(bad, "hooks.example.com,") {
			t.Errorf("WEBHOOK_ALLOWLIST=%q admits hooks.example.com", bad)
		}
		if e.Webhook.CheckURL("https://public.example.org/x") == nil {
			t.Errorf("WEBHOOK_ALLOWLIST=%q admits a host not on it", bad)
		}
	}
	for v, want := range map[string][]string{
		"a.com, *.b.com":                {"a.com", "*.b.com"},
		"Hooks.Example.COM":             {"hooks.example.com"},
		"hooks.example.com.":            {"hooks.example.com"},
		"203.0.113.7,2001:db8::1":       {"203.0.113.7", "2001:db8::1"},
		"xn--bcher-kva.example,a-b.c9":  {"xn--bcher-kva.example", "a-b.c9"},
		" a.com ,, *.b.com , localhost": {"a.com", "*.b.com", "localhost"},
	} {
		e, err := load(v)
		if err != nil || !reflect.DeepEqual(e.Webhook.Allow, want) || len(e.Warnings) != 0 {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: %q %q %v, want %q", v, e.Webhook.Allow, e.Warnings, err, want)
		}
	}
}
