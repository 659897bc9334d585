package idem_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestMissingCredentialPartIsLoggedByName: a keyed request whose credential
// lacks a part the policy scopes keys by (the commerce policy's namespace
// and worker, the ERP policy's clientId, companyId and organizationId) is
// answered 401 with the policy's envelope, which says only that
// authentication is required; the Guard logs one warning naming the part
// and where it comes from, so that the operator of an authorizer (or of an
// API key) that does not pass it learns what to add (RED_TEAM 286). The
// answer itself is unchanged.
func TestMissingCredentialPartIsLoggedByName(t *testing.T) {
	var logs testutil.SyncBuffer
	e := newEnv(t, func(c *idem.Config) {
		c.Policy = partnerPolicy
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	h := &handler{}
	r := e.call(h, partnerEvent("POST", "POST /orders", "ORDER#42", `{}`, ""))
	var body map[string]any
	_ = json.Unmarshal([]byte(r.Body), &body)
	if r.StatusCode != 401 || body["fault"] != "UNAUTHENTICATED" || h.Calls() != 0 {
		t.Fatalf("no workerId in the credential: %d %s, %d runs; want 401 and nothing run", r.StatusCode, r.Body, h.Calls())
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["level"] == "WARN" && strings.Contains(l, "workerId") {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no warning names the missing credential part workerId; logs:\n%s", logs.String())
	}
	msg, _ := line["msg"].(string)
	if !strings.Contains(msg, "authorizer") || line["credential_part"] != "workerId" || line["operation"] != "POST /orders" ||
		line["request_id"] == "" || line["outcome"] != "unauthenticated" || strings.Contains(logs.String(), "ORDER#42") {
		t.Fatalf("the warning %v: want it to name the part (credential_part), say the authorizer passes it, carry request_id, operation and outcome unauthenticated, never the key", line)
	}
}
