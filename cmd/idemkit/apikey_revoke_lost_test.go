package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestAPIKeyRevokeWhoseAnswerWasLost (RED_TEAM 364): a revoke whose
// DeleteItem landed and whose answer was lost (the SDK sends it again and
// the retry's condition fails on the key the first try deleted) says the
// key is revoked, exit 0, with a line saying the answer was lost; it
// never says "no key … nothing revoked". One whose retries then fail reads
// the key back: gone, the same; that read failing too, it says the delete
// may have landed. A try refused with an answer (a
// throttle) or never sent (a refused connection) is no lost answer: a key
// that is not there is still "no key", exit 1. On the emulators.
func TestAPIKeyRevokeWhoseAnswerWasLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		table := e.CreateTable(t, "ApiKeysTable")
		ep := e.Endpoint
		cli := func(args ...string) (int, string, string) {
			t.Helper()
			var out, errb bytes.Buffer
			code := run(ctx, append(args, "--endpoint", ep, "--table", table, "--region", e.Region), &out, &errb)
			return code, out.String(), errb.String()
		}
		mint := func(tenant string) string {
			t.Helper()
			code, out, errb := cli("apikey", "create", "--tenant", tenant)
			if code != 0 {
				t.Fatalf("apikey create: %d %s", code, errb)
			}
			return strings.TrimSpace(out)
		}
		authz := &authfn.Handler{Keys: &apikeys.DynamoKeys{Client: e.Client(), Table: table}}
		granted := func(k string) bool {
			t.Helper()
			r, err := authz.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + k}})
			if err != nil && !errors.Is(err, authfn.ErrUnauthorized) {
				t.Fatalf("authorizer: %v", err)
			}
			return err == nil && r.IsAuthorized
		}
		faulted := func(arm func(f *dynamotest.Faults), args ...string) (int, string, string) {
			t.Helper()
			f := dynamotest.NewFaults()
			arm(f)
			setEndpointClientOptions(t, dynamotest.FastRetries, f.Middleware())
			defer setEndpointClientOptions(t)
			code, out, errb := cli(args...)
			if f.Pending() != 0 {
				t.Fatalf("%d faults not fired", f.Pending())
			}
			return code, out, errb
		}
		clean := func(k, out, errb string) {
			t.Helper()
			if strings.Contains(out+errb, k) || inLibrarysWords(errb) || strings.Contains(errb, "host: ") {
				t.Fatalf("stdout %q stderr %q: the key or the library's words", out, errb)
			}
		}

		for _, n := range []int{1, 2} {
			k := mint("acme")
			code, out, errb := faulted(func(f *dynamotest.Faults) { f.FailNextAfterSend("DeleteItem", n, dynamotest.ResponseLost()) },
				"apikey", "revoke", "--key", k)
			lines := strings.Split(strings.TrimSuffix(errb, "\n"), "\n")
			if code != 0 || out != "revoked "+apikeys.HashKey(k)+" (tenant unknown: the delete's answer was lost)\n" ||
				len(lines) != 2 || !strings.Contains(lines[0], "got no answer") || !strings.Contains(lines[0], "that try revoked it, or it was already gone") ||
				!strings.Contains(lines[0], table) || !strings.Contains(lines[1], "cache") {
				t.Fatalf("a revoke whose answer was lost %d times: exit %d stdout %q stderr %q; want 0, revoked (tenant unknown), a line saying the answer was lost, the cache notice", n, code, out, errb)
			}
			clean(k, out, errb)
			if granted(k) {
				t.Fatal("the key is still granted")
			}
		}

		// Lost, then throttled until the SDK gives up: the delete landed;
		// the key read back is gone (RED_TEAM 366).
		k := mint("acme")
		code, out, errb := faulted(lostThen("DeleteItem", 0, false), "apikey", "revoke", "--key", k)
		if code != 0 || out != "revoked "+apikeys.HashKey(k)+" (tenant unknown: the delete's answer was lost)\n" || granted(k) {
			t.Fatalf("a revoke lost then throttled: exit %d stdout %q stderr %q; want revoked (tenant unknown)", code, out, errb)
		}
		// The read throttled too: the command cannot know.
		k = mint("acme")
		code, out, errb = faulted(lostThen("DeleteItem", 0, true), "apikey", "revoke", "--key", k)
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "ProvisionedThroughputExceededException") ||
			!strings.Contains(errb, "may have revoked it") || !strings.Contains(errb, "run the revoke again") {
			t.Fatalf("a revoke lost then throttled, its read too: exit %d stdout %q stderr %q; want 1 and one line saying a try may have revoked it", code, out, errb)
		}
		clean(k, out, errb)
		if code, out, errb := cli("apikey", "revoke", "--key", k); code != 1 || out != "" || !strings.Contains(errb, "no key") {
			t.Fatalf("the revoke again: exit %d stdout %q stderr %q; want no key (the lost try revoked it)", code, out, errb)
		}

		// Answered refusals and a connection never made are no lost
		// answer: a key that is not there is "no key"; one that is, revoked.
		for name, arm := range map[string]func(f *dynamotest.Faults){
			"throttled": func(f *dynamotest.Faults) { f.FailNext("DeleteItem", 1, dynamotest.Throttle()) },
			"not connected": func(f *dynamotest.Faults) {
				f.FailNext("DeleteItem", 1, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
			},
		} {
			code, out, errb := faulted(arm, "apikey", "revoke", "--key", k)
			if code != 1 || out != "" || !strings.Contains(errb, "no key") || !strings.Contains(errb, "nothing revoked") {
				t.Fatalf("%s, a key not there: exit %d stdout %q stderr %q; want no key, exit 1", name, code, out, errb)
			}
			k2 := mint("acme")
			code, out, errb = faulted(arm, "apikey", "revoke", "--key", k2)
			if code != 0 || out != "revoked "+apikeys.HashKey(k2)+" (tenant acme)\n" || granted(k2) {
				t.Fatalf("%s, a key there: exit %d stdout %q stderr %q; want revoked (tenant acme)", name, code, out, errb)
			}
		}

		// Another tenant's key: the lost try's condition failed too.
		k = mint("globex")
		code, out, errb = faulted(func(f *dynamotest.Faults) { f.FailNextAfterSend("DeleteItem", 1, dynamotest.ResponseLost()) },
			"apikey", "revoke", "--key", k, "--tenant", "acme")
		if code != 1 || out != "" || !strings.Contains(errb, "another tenant") || !granted(k) {
			t.Fatalf("another tenant's key, the answer lost: exit %d stdout %q stderr %q granted %v; want 1, another tenant, still granted", code, out, errb, granted(k))
		}
	})
}
