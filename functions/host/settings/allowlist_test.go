package settings

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestWebhookAllowlistEntriesAreHosts: WEBHOOK_ALLOWLIST is checked when
// the function starts, as every other setting: an entry that is not a host
// ("example.com"), a "*.domain" or an IP address — a URL, a host with a
// port or a path, an IPv6 address in brackets, a pattern other than a
// leading "*." — is an invalid setting naming it. Before, such an entry was
// kept and matched no destination, so the typo of one operator refused
// every tenant's webhook run (400 webhook_url_rejected, "not on the
// allowlist") while the stack looked healthy (RED_TEAM 362). Well-formed
// entries load as before, an absolute host's trailing dot aside (a
// destination is checked without it).
func TestWebhookAllowlistEntriesAreHosts(t *testing.T) {
	load := func(v string) (Env, error) {
		return LoadEnv(func(k string) string { return map[string]string{envWebhookAllowlist: v}[k] })
	}
	for _, bad := range []string{
		"https://hooks.example.com", "hooks.example.com:443", "hooks.example.com/path", "[", "[::1]",
		"*example.com", "hooks.*.example.com", "*", "*.", "a..b", "-a.example.com", "a b.example.com", "user@example.com",
		"hooks.example.com, https://other.example.com",
	} {
		_, err := load(bad)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), envWebhookAllowlist) {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: LoadEnv = %v, want an invalid setting naming it", bad, err)
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
		if err != nil || !reflect.DeepEqual(e.Webhook.Allow, want) {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: %q %v, want %q", v, e.Webhook.Allow, err, want)
		}
	}
}
