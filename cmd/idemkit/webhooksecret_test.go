package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestWebhookSecretHelpAndUsage (RED_TEAM 340): `idemkit webhook secret
// rotate` and `remove` say what they do in their help (exit 0, stdout),
// and refuse a missing or bad --tenant, a --grace outside 0 or 1m..720h
// and an argument with a usage error in words (exit 2, two lines on
// stderr, nothing on stdout), before any store is reached.
func TestWebhookSecretHelpAndUsage(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"webhook", "secret", "rotate", "-h"}, []string{"usage: idemkit webhook secret rotate --tenant T", "printed", "whsec_", "--grace", "two signatures", "unsigned", "--table", "--endpoint", "--region"}},
		{[]string{"webhook", "secret", "remove", "-h"}, []string{"usage: idemkit webhook secret remove --tenant T", "unsigned again", "--table"}},
		{[]string{"webhook", "-h"}, []string{"secret rotate", "secret remove"}},
		{[]string{"help", "webhook", "secret", "rotate"}, []string{"usage: idemkit webhook secret rotate"}},
	} {
		var out, errb bytes.Buffer
		if code := run(ctx, c.args, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errb.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: the help does not say %q:\n%s", c.args, w, out.String())
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"webhook", "secret", "rotate"}, "--tenant T is required"},
		{[]string{"webhook", "secret", "rotate", "--tenant", "a b"}, `--tenant "a b": want the tenant`},
		{[]string{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "5s"}, `--grace "5s": want 0`},
		{[]string{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "-1h"}, `--grace "-1h": want 0`},
		{[]string{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "721h"}, `--grace "721h": want 0`},
		{[]string{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "a day"}, `--grace "a day": want 0`},
		{[]string{"webhook", "secret", "rotate", "--tenant", "acme", "extra"}, `unexpected argument "extra"`},
		{[]string{"webhook", "secret", "rotate", "--tenant", "acme", "--secret", "whsec_S3CR3TS3CR3TS3CR3TS3CR3TS3CR3T"}, "--secret takes - alone"},
		{[]string{"webhook", "secret", "rotate", "--tenant", "acme"}, "is required without --endpoint"},
		{[]string{"webhook", "secret", "remove"}, "--tenant T is required"},
		{[]string{"webhook", "secret", "remove", "--tenant", "acme", "x"}, `unexpected argument "x"`},
		{[]string{"webhook", "secret", "show", "--tenant", "acme"}, `unknown command "show": want rotate or remove`},
		{[]string{"webhook", "key"}, `unknown command "key": want secret`},
	} {
		t.Setenv("API_KEYS_TABLE", "")
		var out, errb bytes.Buffer
		code := run(ctx, c.args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.Contains(lines[0], c.want) || !strings.HasPrefix(lines[1], "run 'idemkit ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q, then the hint", c.args, code, out.String(), errb.String(), c.want)
		}
		if strings.Contains(errb.String(), "S3CR3T") {
			t.Errorf("%v: the refusal quotes the secret: %q", c.args, errb.String())
		}
	}
	// --secret - with stdin holding no secret: refused, not quoted.
	for _, in := range []string{"", "whsec_c2hvcnQ=\n", "S3CR3T S3CR3T\n"} {
		old := stdin
		stdin = strings.NewReader(in)
		var out, errb bytes.Buffer
		code := run(ctx, []string{"webhook", "secret", "rotate", "--tenant", "acme", "--secret", "-", "--endpoint", "http://127.0.0.1:9"}, &out, &errb)
		stdin = old
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "--secret -: stdin holds no signing secret") ||
			strings.Contains(errb.String(), "S3CR3T") || strings.Contains(errb.String(), "c2hvcnQ") {
			t.Errorf("stdin %q: exit %d, stderr %q; want 2, the refusal, and no quote", in, code, errb.String())
		}
	}
}

// TestWebhookSecretRotateAndRemove (RED_TEAM 340): on the emulators, a
// rotation prints the new secret once, alone on stdout (stderr says when
// it signs and until when the previous one does, never a secret); the
// executor's read then gives the new secret, then the previous one during
// the grace; another tenant is untouched. A removal leaves the tenant
// unsigned; removing again, or a missing table, is a failure in words
// (exit 1).
func TestWebhookSecretRotateAndRemove(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		prefix := fmt.Sprintf("ws%d-", time.Now().UnixNano())
		table := prefix + "ApiKeysTable"
		cli := func(args ...string) (int, string, string) {
			t.Helper()
			var out, errb bytes.Buffer
			code := run(ctx, append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
			return code, out.String(), errb.String()
		}
		if code, _, errb := cli("webhook", "secret", "rotate", "--tenant", "acme"); code != 1 || !strings.Contains(errb, "does not exist") {
			t.Fatalf("a missing table: exit %d, %q; want 1 and the table named", code, errb)
		}
		var terr bytes.Buffer
		if code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", prefix, "--endpoint", e.Endpoint}, &bytes.Buffer{}, &terr); code != 0 {
			t.Fatalf("tables create: %d %s", code, terr.String())
		}
		code, first, errb := cli("webhook", "secret", "rotate", "--tenant", "acme")
		s1 := strings.TrimSuffix(first, "\n")
		if _, err := apikeys.ParseSigningSecret(s1); code != 0 || err != nil || strings.Count(first, "\n") != 1 ||
			!strings.Contains(errb, "signed with this secret alone") {
			t.Fatalf("first rotation: exit %d, stdout %q (%v), stderr %q", code, first, err, errb)
		}
		code, second, errb := cli("webhook", "secret", "rotate", "--tenant", "acme", "--grace", "2h")
		s2 := strings.TrimSuffix(second, "\n")
		if code != 0 || s2 == s1 || !strings.Contains(errb, "previous one too until ") || strings.Contains(errb, "whsec_") {
			t.Fatalf("second rotation: exit %d, stderr %q", code, errb)
		}
		reader := &apikeys.SigningSecrets{Client: e.Client(), Table: table}
		got, err := reader.WebhookSecrets(ctx, "acme")
		k1, _ := apikeys.ParseSigningSecret(s1)
		k2, _ := apikeys.ParseSigningSecret(s2)
		if err != nil || len(got) != 2 || !bytes.Equal(got[0], k2) || !bytes.Equal(got[1], k1) {
			t.Fatalf("after two rotations the executor reads %d secrets (%v); want the new one, then the previous one", len(got), err)
		}
		if got, _ := (&apikeys.SigningSecrets{Client: e.Client(), Table: table}).WebhookSecrets(ctx, "globex"); got != nil {
			t.Fatal("another tenant got a secret")
		}
		// The same secret in another table (another region's): --secret -
		// writes it and prints nothing; given again, nothing is written.
		other := prefix + "b"
		if code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", other, "--endpoint", e.Endpoint}, &bytes.Buffer{}, &terr); code != 0 {
			t.Fatalf("tables create: %d %s", code, terr.String())
		}
		for i, want := range []string{"signed with this secret alone", "already this one; nothing written"} {
			old := stdin
			stdin = strings.NewReader(second)
			var out, errb bytes.Buffer
			code := run(ctx, []string{"webhook", "secret", "rotate", "--tenant", "acme", "--secret", "-", "--endpoint", e.Endpoint, "--table", other + "ApiKeysTable"}, &out, &errb)
			stdin = old
			if code != 0 || out.Len() != 0 || !strings.Contains(errb.String(), want) || strings.Contains(errb.String(), "whsec_") {
				t.Fatalf("--secret - (%d): exit %d, stdout %q, stderr %q", i+1, code, out.String(), errb.String())
			}
		}
		if got, _ := (&apikeys.SigningSecrets{Client: e.Client(), Table: other + "ApiKeysTable"}).WebhookSecrets(ctx, "acme"); len(got) != 1 || !bytes.Equal(got[0], k2) {
			t.Fatal("the other table does not hold the given secret")
		}
		if code, out, errb := cli("webhook", "secret", "remove", "--tenant", "acme"); code != 0 || out != "removed the signing secret of tenant acme\n" {
			t.Fatalf("remove: exit %d, %q %q", code, out, errb)
		}
		if got, _ := (&apikeys.SigningSecrets{Client: e.Client(), Table: table}).WebhookSecrets(ctx, "acme"); got != nil {
			t.Fatal("a removed secret is still read")
		}
		if code, out, errb := cli("webhook", "secret", "remove", "--tenant", "acme"); code != 1 || out != "" || !strings.Contains(errb, "has no signing secret") || !strings.Contains(errb, "nothing removed") {
			t.Fatalf("remove again: exit %d, %q %q", code, out, errb)
		}
	})
}

// TestWebhookSecretRotateKeepsEveryGrace (RED_TEAM 353): on the emulators,
// a rotation within earlier graces says that the secrets replaced before
// it sign too, each until when; one that would keep a fifth replaced
// secret is refused in words (exit 1, nothing on stdout, nothing written)
// naming when the first kept grace ends and --grace 0, which is accepted.
func TestWebhookSecretRotateKeepsEveryGrace(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		prefix := fmt.Sprintf("wg%d-", time.Now().UnixNano())
		table := prefix + "ApiKeysTable"
		cli := func(args ...string) (int, string, string) {
			t.Helper()
			var out, errb bytes.Buffer
			code := run(ctx, append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
			return code, out.String(), errb.String()
		}
		var terr bytes.Buffer
		if code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", prefix, "--endpoint", e.Endpoint}, &bytes.Buffer{}, &terr); code != 0 {
			t.Fatalf("tables create: %d %s", code, terr.String())
		}
		if code, _, errb := cli("webhook", "secret", "rotate", "--tenant", "acme"); code != 0 {
			t.Fatalf("first rotation: exit %d, %q", code, errb)
		}
		for i, g := range []string{"3h", "2h", "4h", "5h"} {
			code, out, errb := cli("webhook", "secret", "rotate", "--tenant", "acme", "--grace", g)
			if code != 0 || out == "" || !strings.Contains(errb, "previous one too until ") || strings.Contains(errb, "whsec_") {
				t.Fatalf("rotation %d: exit %d, stderr %q", i+2, code, errb)
			}
			if want := fmt.Sprintf("with %d secret(s) replaced before it too, each until its grace ends (", i); i > 0 && !strings.Contains(errb, want) {
				t.Fatalf("rotation %d: stderr %q; want %q", i+2, errb, want)
			}
		}
		reader := func() int {
			got, err := (&apikeys.SigningSecrets{Client: e.Client(), Table: table}).WebhookSecrets(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			return len(got)
		}
		if n := reader(); n != 5 {
			t.Fatalf("%d secrets sign; want 5", n)
		}
		code, out, errb := cli("webhook", "secret", "rotate", "--tenant", "acme", "--grace", "1h")
		if code != 1 || out != "" || !strings.Contains(errb, "already has 4 replaced secrets signing in their graces") ||
			!strings.Contains(errb, "the first of those graces ends at ") || !strings.Contains(errb, "--grace 0") || !strings.Contains(errb, "nothing written") {
			t.Fatalf("a fifth grace: exit %d, stdout %q, stderr %q; want 1 and the refusal", code, out, errb)
		}
		if code, out, errb := cli("webhook", "secret", "rotate", "--tenant", "acme", "--grace", "0"); code != 0 || out == "" ||
			!strings.Contains(errb, "with 4 secret(s) replaced before it too") {
			t.Fatalf("--grace 0: exit %d, stderr %q", code, errb)
		}
		if n := reader(); n != 5 {
			t.Fatalf("%d secrets sign after --grace 0; want the new one and the four kept", n)
		}
	})
}
