package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestARefusedKeyFlagDoesNotEchoTheKey pins RED_TEAM 269: a value refused of a flag
// that carries an API key (`idemkit dev --api-key`, `idemkit conform
// --api-key` and `--scope-key`) is not quoted in the usage error, which
// goes to stderr (a CI log, a shared terminal); the error still names the
// flag and what it wants.
func TestARefusedKeyFlagDoesNotEchoTheKey(t *testing.T) {
	const secret = "k-S3CR3T-0123456789abcdef"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--api-key", secret + "=a~b"}, "--api-key"},
		{[]string{"dev", "--api-key", secret}, "--api-key"},
		{[]string{"dev", "--api-key", secret + "=acme", "--api-key", secret + "=globex"}, "--api-key"},
		{[]string{"conform", "--scope-key", secret, "http://127.0.0.1:9"}, "--scope-key"},
	} {
		var out, errb bytes.Buffer
		// A dev that took the key would start: the deadline stops it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		code := run(ctx, c.args, &out, &errb)
		cancel()
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != 2 || !strings.Contains(first, c.want) {
			t.Errorf("%q: exit %d, first line %q; want 2, naming %s", c.args, code, first, c.want)
		}
		if strings.Contains(errb.String()+out.String(), "S3CR3T") {
			t.Errorf("%q: the output quotes the key: %q", c.args, errb.String())
		}
	}
}

// TestARefusedRevokeHashDoesNotEchoAKey: `apikey revoke --hash` given the
// key itself (a minted one, or any value the authorizer would take as a
// key) instead of its stored hash is refused without quoting the value, as
// the refusal of a key flag is (RED_TEAM 540); a value shaped as a hash
// (key#, hex digits) that is not one is still quoted, to show the fault.
func TestARefusedRevokeHashDoesNotEchoAKey(t *testing.T) {
	for _, secret := range []string{"idk_S3CR3TabcdefghijklmnopqrstuvwxyzAB", "k-S3CR3T-0123456789abcdef", "key#S3CR3T"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"apikey", "revoke", "--hash", secret, "--endpoint", "http://127.0.0.1:9"}, &out, &errb)
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != 2 || !strings.Contains(first, "--hash") {
			t.Errorf("%q: exit %d, first line %q; want 2, naming --hash", secret, code, first)
		}
		if strings.Contains(errb.String()+out.String(), "S3CR3T") {
			t.Errorf("%q: the output quotes the value: %q", secret, errb.String())
		}
	}
	for _, typo := range []string{"key#0123abc", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"apikey", "revoke", "--hash", typo, "--endpoint", "http://127.0.0.1:9"}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), typo) {
			t.Errorf("%q: exit %d, %q; want 2, quoting the mistyped hash", typo, code, errb.String())
		}
	}
}

// A key given for --hash with what surrounds it when copied (the
// "Bearer " of its header, a space, the carriage return a Windows key
// file keeps through $(cat file)) is not quoted either: the authorizer
// would not take it as it stands, but the key is in it (RED_TEAM 563).
// Before, only a value the authorizer takes as it stands was held back.
func TestARefusedRevokeHashDoesNotEchoAKeyWithWhatSurroundsIt(t *testing.T) {
	for _, secret := range []string{
		"Bearer idk_S3CR3TabcdefghijklmnopqrstuvwxyzAB",
		"idk_S3CR3TabcdefghijklmnopqrstuvwxyzAB ",
		"idk_S3CR3TabcdefghijklmnopqrstuvwxyzAB\r",
		"\"idk_S3CR3TabcdefghijklmnopqrstuvwxyzAB\"",
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"apikey", "revoke", "--hash", secret, "--endpoint", "http://127.0.0.1:9"}, &out, &errb)
		if first, _, _ := strings.Cut(errb.String(), "\n"); code != 2 || !strings.Contains(first, "--hash") {
			t.Errorf("%q: exit %d, first line %q; want 2, naming --hash", secret, code, first)
		}
		if strings.Contains(errb.String()+out.String(), "S3CR3T") {
			t.Errorf("%q: the output quotes the value: %q", secret, errb.String())
		}
	}
}

// A key or signing secret typed as an argument of the commands that take
// one by flag (`apikey revoke KEY`, the most natural typing) is refused
// without quoting it (RED_TEAM 564). Before, "unexpected argument
// "idk_…"" put it on stderr.
func TestAKeyGivenAsAnArgumentIsNotQuoted(t *testing.T) {
	const key, secret = "idk_S3CR3TabcdefghijklmnopqrstuvwxyzAB", "whsec_S3CR3TMDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u"
	for _, args := range [][]string{
		{"apikey", "revoke", key},
		{"apikey", "revoke", "--endpoint", "http://127.0.0.1:9", key},
		{"apikey", "create", "--tenant", "acme", key},
		{"webhook", "secret", "rotate", "--tenant", "acme", secret},
		{"webhook", "secret", "remove", "--tenant", "acme", secret},
		{"dev", key},
		{"conform", key},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		if first, _, _ := strings.Cut(errb.String(), "\n"); code != 2 || !strings.Contains(first, "unexpected argument") && !strings.Contains(first, "URL") {
			t.Errorf("%q: exit %d, first line %q; want 2, an unexpected argument (conform: no URL)", args, code, first)
		}
		if strings.Contains(errb.String()+out.String(), "S3CR3T") {
			t.Errorf("%q: the output quotes the argument: %q", args, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"apikey", "revoke", "--hash", strings.Repeat("0", 64), "a b"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"a b"`) {
		t.Errorf("an argument no key could be: exit %d, %q; want 2, quoting it", code, errb.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"conform", "127.0.0.1:3000/api/orders"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"127.0.0.1:3000/api/orders"`) {
		t.Errorf("conform given a URL without its scheme: exit %d, %q; want 2, quoting it", code, errb.String())
	}
}

// TestAKeyWithWhatSurroundsItGivenAsAnArgumentIsNotQuoted: the key typed
// as an argument is often copied with what surrounded it: "Bearer " from
// a request's Authorization header, the whole header, a space, or the
// carriage return a Windows key file keeps through "$(cat key.txt)". The
// authorizer would not take such a value as it stands, but it holds the
// key: it is refused without quoting it, as the key alone is. Before, each
// was quoted on stderr by the five commands and by conform (RED_TEAM 583,
// 563's forms on 564's path).
func TestAKeyWithWhatSurroundsItGivenAsAnArgumentIsNotQuoted(t *testing.T) {
	const key = "idk_S3CR3TabcdefghijklmnopqrstuvwxyzAB"
	for _, arg := range []string{"Bearer " + key, "Authorization: Bearer " + key, key + " ", " " + key, key + "\r", key + "\r\n", "\t" + key} {
		for _, args := range [][]string{
			{"apikey", "revoke", arg},
			{"apikey", "create", "--tenant", "acme", arg},
			{"webhook", "secret", "rotate", "--tenant", "acme", arg},
			{"webhook", "secret", "remove", "--tenant", "acme", arg},
			{"dev", arg},
			{"conform", arg},
		} {
			var out, errb bytes.Buffer
			code := run(context.Background(), args, &out, &errb)
			if code != 2 {
				t.Errorf("%q: exit %d; want 2", args, code)
			}
			if strings.Contains(errb.String()+out.String(), "S3CR3T") {
				t.Errorf("%q: the output quotes the argument: %q", args, errb.String())
			}
		}
	}
	// Short words, and words no key could be, are still quoted.
	for _, args := range [][]string{
		{"apikey", "revoke", "--hash", strings.Repeat("0", 64), "revoke this key"},
		{"conform", "localhost:3000 /api"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), strconv.Quote(args[len(args)-1])) {
			t.Errorf("%q: exit %d, %q; want 2, quoting it", args, code, errb.String())
		}
	}
}
