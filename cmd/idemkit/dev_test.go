package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

func devCall(t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	resp, m := testutil.DoJSON(t, method, url, body, "Authorization", testutil.Bearer(key))
	return resp.StatusCode, m
}

// TestDevFlagsAndDemoKeys: `idemkit dev` takes exactly the flags the issue
// names (--dynamodb-endpoint, --addr defaulting to 127.0.0.1:3000, repeated
// --api-key KEY=TENANT, --allow-loopback-webhooks); without --api-key it
// mints two demo keys for two tenants and prints them, and each works for
// its own tenant only; with --api-key it seeds exactly those keys and
// prints none. It stops with status 0 when its context ends (SIGINT).
func TestDevFlagsAndDemoKeys(t *testing.T) {
	var usage strings.Builder
	if code := run(context.Background(), []string{"dev", "-h"}, &usage, io.Discard); code != 0 {
		t.Fatalf("dev -h: %d", code)
	}
	for _, f := range []string{"--emulator", "--dynamodb-endpoint", "--addr", "--api-key", "--allow-loopback-webhooks"} {
		if !strings.Contains(usage.String(), "  "+f) {
			t.Errorf("dev -h lacks %s:\n%s", f, usage.String())
		}
	}
	if devstack.DefaultAddr != "127.0.0.1:3000" || !strings.Contains(usage.String(), `(default "127.0.0.1:3000")`) {
		t.Errorf("--addr default: %s", usage.String())
	}

	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("dev%d-", time.Now().UnixNano())
	out, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix)
	re := regexp.MustCompile(`(?m)^demo API key for tenant (demo-[ab]): (idk_\S+)$`)
	found := re.FindAllStringSubmatch(out.text(), -1)
	if len(found) != 2 || found[0][1] != "demo-a" || found[1][1] != "demo-b" || found[0][2] == found[1][2] {
		t.Fatalf("want two demo keys printed:\n%s", out.text())
	}
	code, m := devCall(t, "POST", url+"/runs", found[0][2], `{"workflowId":"conformance-noop"}`)
	if code != 201 || !strings.HasPrefix(fmt.Sprint(m["runId"]), "demo-a/") {
		t.Fatalf("demo-a key: %d %v", code, m)
	}
	id := m["runId"].(string)
	if code, m := devCall(t, "GET", url+"/runs/"+strings.Replace(id, "/", "%2F", 1), found[1][2], ""); code != 403 || m["error"] != "id_tenant_mismatch" {
		t.Fatalf("demo-b reading demo-a's run: %d %v", code, m)
	}
	if code, m := devCall(t, "GET", url+"/runs/"+strings.Replace(id, "/", "~2F", 1), "idk_not_a_key", ""); code != 401 || m["error"] != "unauthenticated" {
		t.Fatalf("bad key: %d %v", code, m)
	}
	// Without --allow-loopback-webhooks a loopback destination is refused.
	if code, m := devCall(t, "POST", url+"/runs", found[0][2], `{"workflowId":"webhook","inputs":{"url":"http://127.0.0.1:9/"}}`); code != 400 || m["error"] != "webhook_url_rejected" {
		t.Fatalf("loopback webhook without the flag: %d %v", code, m)
	}

	// Repeated --api-key seeds those keys (and prints no demo key); the
	// tables created above are kept; --allow-loopback-webhooks admits
	// loopback destinations.
	out2, url2 := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix,
		"--api-key", "idk_seeded_one_0123456789=acme", "--api-key", "idk_seeded_two_0123456789=globex", "--allow-loopback-webhooks")
	if strings.Contains(out2.text(), "demo API key") {
		t.Fatalf("demo keys minted despite --api-key:\n%s", out2.text())
	}
	for key, tenant := range map[string]string{"idk_seeded_one_0123456789": "acme", "idk_seeded_two_0123456789": "globex"} {
		if code, m := devCall(t, "POST", url2+"/runs", key, `{"workflowId":"webhook","inputs":{"url":"http://127.0.0.1:9/"}}`); code != 201 || !strings.HasPrefix(fmt.Sprint(m["runId"]), tenant+"/") {
			t.Fatalf("%s: %d %v", tenant, code, m)
		}
	}
}
