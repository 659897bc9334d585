package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// devPolicy reads the active policy from GET /.well-known/openwop
// (extensions["idemkit.idempotency"].policy).
func devPolicy(t *testing.T, url string) string {
	t.Helper()
	resp, m := testutil.DoJSON(t, "GET", url+"/.well-known/openwop", "")
	ext, _ := m["extensions"].(map[string]any)
	p, _ := ext[settings.ExtensionIdempotency].(map[string]any)
	if resp.StatusCode != 200 || p == nil {
		t.Fatalf("discovery: %d %v", resp.StatusCode, m)
	}
	return fmt.Sprint(p["policy"])
}

// `idemkit dev` reads the configuration variables the functions read:
// with IDEMPOTENCY_REQUIRED=true in its environment a POST /runs without an
// Idempotency-Key is 400 idempotency_key_invalid (reason "missing"), and
// with IDEMPOTENCY_POLICY=commerce discovery names the commerce policy;
// the tables stay the ones dev created whatever the environment names.
func TestDevHonoursEnvironment(t *testing.T) {
	t.Setenv("IDEMPOTENCY_REQUIRED", "true")
	t.Setenv("IDEMPOTENCY_POLICY", "commerce")
	t.Setenv("RUNS_TABLE", "not-a-table-dev-created")
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("devenv%d-", time.Now().UnixNano())
	const key = "idk_env_test_0123456789"
	_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", key+"=acme")
	code, m := devCall(t, "POST", url+"/runs", key, `{"workflowId":"conformance-noop"}`)
	details, _ := m["details"].(map[string]any)
	if code != 400 || m["error"] != "idempotency_key_invalid" || details["reason"] != "missing" {
		t.Fatalf("POST /runs without a key under IDEMPOTENCY_REQUIRED=true: %d %v", code, m)
	}
	resp, m := testutil.DoJSON(t, "POST", url+"/runs", `{"workflowId":"conformance-noop"}`,
		"Authorization", testutil.Bearer(key), "Idempotency-Key", "commerce-key-1")
	if resp.StatusCode != 201 {
		t.Fatalf("POST /runs with a key: %d %v", resp.StatusCode, m)
	}
	if p := devPolicy(t, url); p != "commerce" {
		t.Fatalf("discovery names %q, want commerce", p)
	}
}

// `idemkit dev --policy erp` runs Layer 1 under the ERP policy, overriding
// IDEMPOTENCY_POLICY: a first execution answers "Idempotency-Replayed:
// false" with the key echoed, its replay "Idempotency-Replayed: true", and
// discovery names erp.
func TestDevPolicyFlag(t *testing.T) {
	t.Setenv("IDEMPOTENCY_POLICY", "commerce")
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("devpol%d-", time.Now().UnixNano())
	const key = "idk_policy_test_0123456789"
	_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", key+"=acme", "--policy", "erp")
	for i, want := range []string{"false", "true"} {
		resp, m := testutil.DoJSON(t, "POST", url+"/runs", `{"workflowId":"conformance-noop"}`,
			"Authorization", testutil.Bearer(key), "Idempotency-Key", "ERP-ORDER-0001")
		if resp.StatusCode != 201 || resp.Header.Get("Idempotency-Replayed") != want || resp.Header.Get("Idempotency-Key") != "ERP-ORDER-0001" {
			t.Fatalf("request %d: %d %v %v", i+1, resp.StatusCode, resp.Header, m)
		}
	}
	if p := devPolicy(t, url); p != "erp" {
		t.Fatalf("discovery names %q, want erp", p)
	}
}

// A bad --policy or IDEMPOTENCY_POLICY stops `idemkit dev` before it starts
// anything, with exit status 2 and a message naming the variable, the flag
// and the allowed values.
func TestDevBadPolicy(t *testing.T) {
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"dev", "--policy", "strict"}, &bytes.Buffer{}, &errb); code != 2 {
		t.Fatalf("--policy strict: exit %d: %s", code, errb.String())
	}
	for _, s := range []string{"IDEMPOTENCY_POLICY", `"strict"`, "openwop, commerce, erp", "--policy"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("--policy strict: %q lacks %s", errb.String(), s)
		}
	}
	// The setting and what is wrong with it, not the packages the error
	// went through, and the flag that set it, in one line; then the hint.
	if want := "idemkit dev: invalid setting: IDEMPOTENCY_POLICY=\"strict\": want one of openwop, commerce, erp (--policy sets IDEMPOTENCY_POLICY)\n" +
		"run 'idemkit dev -h' for help\n"; errb.String() != want {
		t.Errorf("--policy strict: %q, want %q", errb.String(), want)
	}
	t.Setenv("IDEMPOTENCY_POLICY", "sap")
	errb.Reset()
	if code := run(context.Background(), []string{"dev"}, &bytes.Buffer{}, &errb); code != 2 || !strings.Contains(errb.String(), `IDEMPOTENCY_POLICY="sap"`) {
		t.Fatalf("IDEMPOTENCY_POLICY=sap: exit %d: %s", code, errb.String())
	}
}

// `idemkit dev --idempotency-wait D` stands for IDEMPOTENCY_WAIT_MS over the
// environment's value, as --policy does for IDEMPOTENCY_POLICY: with the
// flag given, the environment's IDEMPOTENCY_WAIT_MS is not read (a bad one
// is not reported; a good one does not silently replace the flag's wait),
// 0 is the variable's 0 (a duplicate is answered at once), and a wait
// outside the variable's range is refused naming the variable and the flag.
func TestDevIdempotencyWaitFlagOverridesEnvironment(t *testing.T) {
	t.Setenv("IDEMPOTENCY_WAIT_MS", "soon")
	dev := func(args ...string) (int, string) {
		var errb bytes.Buffer
		code := run(context.Background(), append([]string{"dev"}, args...), &bytes.Buffer{}, &errb)
		return code, errb.String()
	}
	// Without the flag the environment's value is read, and refused.
	if code, errs := dev("--policy", "strict"); code != 2 || !strings.Contains(errs, `IDEMPOTENCY_WAIT_MS="soon"`) {
		t.Fatalf("IDEMPOTENCY_WAIT_MS=soon without the flag: exit %d: %s", code, errs)
	}
	// With it the flag's value stands in: only the bad policy is reported
	// (the bad policy stops start-up before anything is started).
	for _, wait := range []string{"300ms", "0", "1m"} {
		code, errs := dev("--policy", "strict", "--idempotency-wait", wait)
		if code != 2 || !strings.Contains(errs, `IDEMPOTENCY_POLICY="strict"`) || strings.Contains(errs, "IDEMPOTENCY_WAIT_MS") {
			t.Errorf("--idempotency-wait %s with IDEMPOTENCY_WAIT_MS=soon: exit %d: %s", wait, code, errs)
		}
	}
	for _, tc := range []struct{ wait, want string }{
		{"2m", `IDEMPOTENCY_WAIT_MS="120000"`},
		{"1500us", "whole milliseconds"},
		{"-1s", "must not be negative"},
	} {
		code, errs := dev("--idempotency-wait", tc.wait)
		if code != 2 || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "--idempotency-wait") {
			t.Errorf("--idempotency-wait %s: exit %d: %s (want %q and the flag named)", tc.wait, code, errs, tc.want)
		}
	}
}

// A setting dev can refuse only once it knows its engine (a finite
// RUN_RETENTION_DAYS needs the run written in the Layer-1 completion
// transaction, which RUNS_TRANSACTIONAL=false turns off) is reported as the
// other bad settings are: exit 2, "invalid setting:" and the variable,
// without the name of the package that found it.
func TestDevSettingRefusedByTheWiringIsASettingError(t *testing.T) {
	t.Setenv("RUN_RETENTION_DAYS", "30")
	t.Setenv("RUNS_TRANSACTIONAL", "false")
	e := dynamotest.Start(t, dynamotest.Moto)
	var errb bytes.Buffer
	code := run(context.Background(), []string{"dev", "--addr", testutil.FreeAddr(t), "--dynamodb-endpoint", e.Endpoint,
		"--table-prefix", fmt.Sprintf("devret%d-", time.Now().UnixNano()), "--api-key", "idk_ret_test_0123456789=acme"}, &bytes.Buffer{}, &errb)
	if want := "idemkit dev: invalid setting: RUN_RETENTION_DAYS=30 needs createRun's run written in the Layer-1 completion transaction"; code != 2 || !strings.Contains("\n"+errb.String(), "\n"+want) || strings.Contains(errb.String(), "kit:") {
		t.Fatalf("RUN_RETENTION_DAYS=30 RUNS_TRANSACTIONAL=false: exit %d: %q, want exit 2 and a line starting %q", code, errb.String(), want)
	}
}
