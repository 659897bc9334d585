package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/cmd/idemkit/internal/conform"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// conformPolicyCredential is one API key the policy test creates: the base
// credential's attributes with one part changed (none for the base).
type conformPolicyCredential struct {
	part  string // the conform scope part it differs in; "" for the base key
	attr  string // the credential attribute holding that part
	value string
}

// conformPolicyParts are, by policy, the scope parts and the credential
// attribute each one is read from.
var conformPolicyParts = map[string][]conformPolicyCredential{
	"commerce": {{conform.ScopeNamespace, "namespace", "conform-ns-b"}, {conform.ScopeWorker, "worker", "conform-worker-b"}},
	"erp": {{conform.ScopeClient, "client", "conform-client-b"}, {conform.ScopeCompany, "company", "conform-company-b"},
		{conform.ScopeOrganization, "organisation", "conform-org-b"}},
}

// conformPolicyBase is the base credential's attributes: every part both
// shipped policies scope keys by, the ERP parts under both the names of
// idemkit dev's demo keys (client, company, organisation) and the ERP
// policy's credential names (clientId, companyId, organizationId).
var conformPolicyBase = map[string]string{
	"namespace": "conform-ns-a", "worker": "conform-worker-a",
	"client": "conform-client-a", "company": "conform-company-a", "organisation": "conform-org-a",
	"clientId": "conform-client-a", "companyId": "conform-company-a", "organizationId": "conform-org-a",
}

// conformPolicyAliases are the other names of an ERP attribute.
var conformPolicyAliases = map[string]string{"client": "clientId", "company": "companyId", "organisation": "organizationId"}

// TestConformPoliciesAgainstIdemkitDev is the "done when" for the
// commerce and ERP policies: `idemkit conform --profile commerce` passes
// every scenario against `idemkit dev --policy commerce`, and
// `--profile erp` every scenario against `idemkit dev --policy erp` (that
// they fail against a server that breaks any one rule is
// TestBrokenServerFailsTheMatchingScenario in cmd/idemkit/internal/conform). Each dev
// runs on its own tables of the engine; the API keys are created with
// `idemkit apikey create --attr`, the base key and, per scope part, one that
// differs from it in that part only. It runs on every engine with streams,
// the engines and policies side by side (each dev on its own tables; most
// of a conform run waits out the scenarios' deliberate delays).
func TestConformPoliciesAgainstIdemkitDev(t *testing.T) {
	bin, err := testutil.Build(t.TempDir(), "idemkit", "cmd/idemkit", nil, nil)
	if err != nil {
		testutil.Unavailable(t, "idemkit is not available: %v", err)
	}
	// idemkit dev --dynamodb-endpoint needs the runs table's stream.
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		t.Parallel()
		for _, policy := range []string{"commerce", "erp"} {
			t.Run(policy, func(t *testing.T) {
				t.Parallel()
				conformPolicyAgainstDev(t, bin, e, policy)
			})
		}
	})
}

// conformPolicyAgainstDev starts `idemkit dev --policy policy` on e, creates
// the API keys and runs `idemkit conform --profile policy` against it.
func conformPolicyAgainstDev(t *testing.T, bin string, e *dynamotest.Emulator, policy string) {
	prefix := fmt.Sprintf("conform-%s-%d-", policy, time.Now().UnixNano())
	addr := testutil.FreeAddr(t)
	// A webhook receiver that refuses every delivery: the commerce
	// profile's --failed-run-body is a run that fails after its 201.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	defer refuse.Close()
	p := testutil.Start(t, exec.Command(bin, "dev", "--policy", policy, "--addr", addr, "--allow-loopback-webhooks",
		"--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix,
		"--api-key", "idk_conform_unused_"+policy+"_0123456789=conform-unused"), 30*time.Second)
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := testutil.WaitHTTP(ctx, url+"/.well-known/openwop", p.Done()); err != nil {
		t.Fatalf("idemkit dev --policy %s did not start: %v\n%s", policy, err, p.Log.String())
	}
	create := func(attrs map[string]string) string {
		t.Helper()
		args := []string{"apikey", "create", "--tenant", "conform-a", "--endpoint", e.Endpoint, "--table", prefix + "ApiKeysTable"}
		for n, v := range attrs {
			args = append(args, "--attr", n+"="+v)
		}
		var out, errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("idemkit %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return strings.TrimSpace(out.String())
	}
	args := []string{"--profile", policy, "--api-key", create(conformPolicyBase)}
	if policy == "commerce" {
		args = append(args, "--failed-run-body", `{"workflowId":"webhook","inputs":{"url":"`+refuse.URL+`/hook","payload":{"order":1}}}`)
	}
	for _, c := range conformPolicyParts[policy] {
		attrs := map[string]string{}
		for k, v := range conformPolicyBase {
			attrs[k] = v
		}
		attrs[c.attr] = c.value
		if alias, ok := conformPolicyAliases[c.attr]; ok {
			attrs[alias] = c.value
		}
		args = append(args, "--scope-key", c.part+"="+create(attrs))
	}
	var out, errOut bytes.Buffer
	code := runConform(context.Background(), append(args, url), &out, &errOut)
	t.Logf("idemkit conform %s:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	want := fmt.Sprintf("%d passed, 0 failed", len(conform.ScenariosFor(conform.Profile(policy))))
	if code != 0 || conformLastLine(out.String()) != want {
		t.Fatalf("exit %d, want 0 and %q\n%s\nidemkit dev's log:\n%s", code, want, errOut.String(), p.Log.String())
	}
}
