package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// lostWriteFixture runs the CLI against an api-keys table of e, with
// faults armed for one command.
type lostWriteFixture struct {
	t     *testing.T
	e     *dynamotest.Emulator
	table string
}

func (f lostWriteFixture) cli(in string, arm func(*dynamotest.Faults), args ...string) (int, string, string) {
	f.t.Helper()
	old := stdin
	stdin = strings.NewReader(in)
	defer func() { stdin = old }()
	faults := dynamotest.NewFaults()
	if arm != nil {
		arm(faults)
	}
	setEndpointClientOptions(f.t, dynamotest.FastRetries, faults.Middleware())
	defer setEndpointClientOptions(f.t)
	var out, errb bytes.Buffer
	code := run(context.Background(), append(args, "--endpoint", f.e.Endpoint, "--table", f.table, "--region", f.e.Region), &out, &errb)
	if faults.Pending() != 0 {
		f.t.Fatalf("%s: %d faults not fired", strings.Join(args, " "), faults.Pending())
	}
	return code, out.String(), errb.String()
}

// lostThen arms a write of op whose answer is lost, then refused until the
// SDK gives up; with readFails, the reads after the command's first n
// (passReads) fail too.
func lostThen(op string, passReads int, readFails bool) func(*dynamotest.Faults) {
	return func(f *dynamotest.Faults) {
		f.FailNextAfterSend(op, 1, dynamotest.ResponseLost())
		f.FailNext(op, 2, dynamotest.Throttle())
		if readFails {
			f.PassNext("GetItem", passReads)
			f.FailNext("GetItem", 3, dynamotest.Throttle())
		}
	}
}

// TestAPIKeyCreateWhoseAnswerWasLost (RED_TEAM 365, 442): `apikey create`
// whose PutItem landed and whose answer was lost prints the key (exit 0),
// which the authorizer accepts; before, the SDK's retry was refused by
// the condition on the key the first try stored, and the command said
// "api key already registered", exit 1, the key stored and never shown.
// One whose retries then fail reads the item back: stored, the key is
// printed; that read failing too, it says the key may be stored and names
// the hash that revokes it, never the key. On the emulators.
func TestAPIKeyCreateWhoseAnswerWasLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		f := lostWriteFixture{t, e, e.CreateTable(t, "ApiKeysTable")}
		authz := &authfn.Handler{Keys: &apikeys.DynamoKeys{Client: e.Client(), Table: f.table}}
		granted := func(k string) bool {
			t.Helper()
			r, err := authz.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + k}})
			if err != nil && !errors.Is(err, authfn.ErrUnauthorized) {
				t.Fatalf("authorizer: %v", err)
			}
			return err == nil && r.IsAuthorized
		}
		for name, arm := range map[string]func(*dynamotest.Faults){
			"lost once":           func(f *dynamotest.Faults) { f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost()) },
			"lost twice":          func(f *dynamotest.Faults) { f.FailNextAfterSend("PutItem", 2, dynamotest.ResponseLost()) },
			"lost then throttled": lostThen("PutItem", 0, false),
		} {
			code, out, errb := f.cli("", arm, "apikey", "create", "--tenant", "acme", "--attr", "worker=w1")
			k := strings.TrimSpace(out)
			if code != 0 || !apikeys.ValidKey(k) || errb != "" || !granted(k) {
				t.Fatalf("%s: exit %d stdout %q stderr %q granted %v; want the key printed, exit 0, the key accepted", name, code, out, errb, granted(k))
			}
		}
		code, out, errb := f.cli("", lostThen("PutItem", 0, true), "apikey", "create", "--tenant", "acme")
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "ProvisionedThroughputExceededException") ||
			!strings.Contains(errb, "may have stored the key, which is not shown") || !strings.Contains(errb, "idemkit apikey revoke --hash key#") ||
			inLibrarysWords(errb) || strings.Contains(errb, "host: ") {
			t.Fatalf("lost, then throttled, the read-back too: exit %d stdout %q stderr %q; want 1 and one line naming the hash to revoke", code, out, errb)
		}
		hash := errb[strings.Index(errb, "key#") : strings.Index(errb, "key#")+68]
		if code, out, errb := f.cli("", nil, "apikey", "revoke", "--hash", hash); code != 0 || out != "revoked "+hash+" (tenant acme)\n" {
			t.Fatalf("revoking the key it may have stored: exit %d stdout %q stderr %q; want revoked (it was stored)", code, out, errb)
		}
		// Lost once, the retry refused by its own write's key, the read
		// back throttled: the same note, never "already registered".
		code, out, errb = f.cli("", func(f *dynamotest.Faults) {
			f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
			f.FailNext("GetItem", 3, dynamotest.Throttle())
		}, "apikey", "create", "--tenant", "acme")
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || strings.Contains(errb, "already registered") ||
			!strings.Contains(errb, "may have stored the key, which is not shown") || !strings.Contains(errb, "idemkit apikey revoke --hash key#") {
			t.Fatalf("lost once, the read-back throttled: exit %d stdout %q stderr %q; want 1 and the note naming the hash", code, out, errb)
		}
		// Refused with an answer on every try: nothing stored, no note.
		code, out, errb = f.cli("", func(f *dynamotest.Faults) { f.FailNext("PutItem", 3, dynamotest.Throttle()) }, "apikey", "create", "--tenant", "acme")
		if code != 1 || out != "" || strings.Contains(errb, "no answer") || !strings.Contains(errb, "ProvisionedThroughputExceededException") {
			t.Fatalf("throttled: exit %d stdout %q stderr %q; want 1, the throttle alone", code, out, errb)
		}
	})
}

// TestWebhookSecretWriteThatFailedAfterALostAnswer (RED_TEAM 366): a
// rotation or removal whose write landed with its answer lost, then was
// refused until the SDK gave up, reads the item back: the rotation prints
// its secret (exit 0), which signs; the removal says removed. Before, both
// said the write failed (exit 1): the rotation's secret signed and was
// never shown. The read-back failing too, each says the write may have
// been applied and what to run, never a secret. On the emulators.
func TestWebhookSecretWriteThatFailedAfterALostAnswer(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		f := lostWriteFixture{t, e, e.CreateTable(t, "ApiKeysTable")}
		signing := func() [][]byte {
			t.Helper()
			got, err := (&apikeys.SigningSecrets{Client: e.Client(), Table: f.table}).WebhookSecrets(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		for _, grace := range []string{"24h", "0"} {
			code, out, errb := f.cli("", lostThen("PutItem", 0, false), "webhook", "secret", "rotate", "--tenant", "acme", "--grace", grace)
			key, err := apikeys.ParseSigningSecret(strings.TrimSpace(out))
			if code != 0 || err != nil || !strings.Contains(errb, "signed with this secret") || len(signing()) == 0 || !bytes.Equal(signing()[0], key) {
				t.Fatalf("rotate --grace %s, lost then throttled: exit %d stdout %q stderr %q; want the secret printed, signing", grace, code, out, errb)
			}
		}
		before := signing()
		code, out, errb := f.cli("", lostThen("PutItem", 1, true), "webhook", "secret", "rotate", "--tenant", "acme")
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "may have written a new secret for tenant acme, which is not shown") ||
			!strings.Contains(errb, "run the rotation again") || strings.Contains(errb, "host: ") || inLibrarysWords(errb) {
			t.Fatalf("rotate, the read-back failing too: exit %d stdout %q stderr %q; want 1, one line: may have written, run again", code, out, errb)
		}
		if bytes.Equal(signing()[0], before[0]) {
			t.Fatal("the lost write did not land: the test proves nothing")
		}
		secret := apikeys.NewSigningSecret()
		code, out, errb = f.cli(secret+"\n", lostThen("PutItem", 1, true), "webhook", "secret", "rotate", "--tenant", "acme", "--secret", "-")
		if code != 1 || out != "" || !strings.Contains(errb, "may have written the secret given") || strings.Contains(errb, secret) {
			t.Fatalf("rotate --secret -, the read-back failing too: exit %d stdout %q stderr %q", code, out, errb)
		}
		if code, out, errb := f.cli(secret+"\n", nil, "webhook", "secret", "rotate", "--tenant", "acme", "--secret", "-"); code != 0 || out != "" || !strings.Contains(errb, "already this one") {
			t.Fatalf("rotate --secret - again: exit %d stdout %q stderr %q; want already this one", code, out, errb)
		}

		code, out, errb = f.cli("", lostThen("DeleteItem", 1, false), "webhook", "secret", "remove", "--tenant", "acme")
		if code != 0 || out != "removed the signing secret of tenant acme\n" || signing() != nil {
			t.Fatalf("remove, lost then throttled: exit %d stdout %q stderr %q; want removed", code, out, errb)
		}
		if code, _, errb := f.cli("", nil, "webhook", "secret", "rotate", "--tenant", "acme"); code != 0 {
			t.Fatalf("rotate: %d %s", code, errb)
		}
		code, out, errb = f.cli("", lostThen("DeleteItem", 1, true), "webhook", "secret", "remove", "--tenant", "acme")
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "may have removed it") || strings.Contains(errb, "host: ") {
			t.Fatalf("remove, the read-back failing too: exit %d stdout %q stderr %q; want 1, may have removed it", code, out, errb)
		}
		if code, out, errb := f.cli("", nil, "webhook", "secret", "remove", "--tenant", "acme"); code != 1 || !strings.Contains(errb, "no signing secret") {
			t.Fatalf("remove again: exit %d stdout %q stderr %q; want no signing secret (the lost try removed it)", code, out, errb)
		}
	})
}
