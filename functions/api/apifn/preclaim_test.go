package apifn

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/header"
)

// TestBodyRefusedForItselfIsAnsweredBeforeTheClaim: a createRun or
// forkRun body refused 400 validation_error for itself alone (a member the
// schema does not define, an unknown workflow, a fork's mode) is answered
// before Layer 1 claims its key, as the bulk cancel's, a cancel's, a
// pause's and a resume's bodies are: nothing is written or recorded
// (RED_TEAM 522; the round trips are TestRoundTripsPerRoute's). The
// contract: validation comes before the key's comparison, so a key used
// with a valid body and sent again with an invalid one is 400
// validation_error (it was 409 idempotency_key_mismatch), and the same
// key with its first body still replays; so is a 403 no key records (a
// configurable's credentialRef). Answers that come first stay
// first: an invalid key (400 idempotency_key_invalid), a body naming
// another tenant (403). A refusal the policy records (422
// capability_required for an eval run) is still answered under the claim
// and replayed.
func TestBodyRefusedForItselfIsAnsweredBeforeTheClaim(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{BodyTenantField: "tenantId", Routes: kit.Layer1Routes()}, nil)
	const valid = `{"workflowId":"conformance-noop"}`
	if r, m := f.do(t, ev("POST", "/runs", "acme", key1, valid)); r.StatusCode != 201 {
		t.Fatalf("first create: %d %v", r.StatusCode, m)
	}
	for _, body := range []string{
		`{"workflowId":"conformance-noop","bogus":1}`,
		`{"workflowId":"no-such-workflow"}`,
		`{"workflowId":"conformance-noop","tags":"one"}`,
	} {
		r, m := f.do(t, ev("POST", "/runs", "acme", key1, body))
		if r.StatusCode != 400 || m["error"] != "validation_error" {
			t.Errorf("the used key with %s: %d %v, want 400 validation_error", body, r.StatusCode, m)
		}
	}
	// A 403 no key records (RED_TEAM 522): before the claim too.
	if r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","configurable":{"version":1,"ai":{"credentialRef":"c"}}}`)); r.StatusCode != 403 || m["error"] != "credential_forbidden" {
		t.Errorf("the used key with a credentialRef: %d %v, want 403 credential_forbidden", r.StatusCode, m)
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", key1, valid)); r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("the key with its first body after the refusals: %d %v %v, want its replay", r.StatusCode, r.Headers, m)
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", "bad key", `{"workflowId":"conformance-noop","bogus":1}`)); r.StatusCode != 400 || m["error"] != "idempotency_key_invalid" {
		t.Errorf("an invalid key and body: %d %v, want 400 idempotency_key_invalid", r.StatusCode, m)
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", "k-preclaim-tenant-0123456789", `{"workflowId":"conformance-noop","tenantId":"globex","bogus":1}`)); r.StatusCode != 403 {
		t.Errorf("another tenant and an invalid body: %d %v, want 403", r.StatusCode, m)
	}
	const eval = `{"workflowId":"conformance-noop","mode":"eval"}`
	const evalKey = "k-preclaim-eval-0123456789ab"
	if r, m := f.do(t, ev("POST", "/runs", "acme", evalKey, eval)); r.StatusCode != 422 || m["error"] != "capability_required" {
		t.Fatalf("an eval run: %d %v, want 422 capability_required", r.StatusCode, m)
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", evalKey, eval)); r.StatusCode != 422 || r.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("an eval run again: %d %v %v, want the recorded 422 replayed", r.StatusCode, r.Headers, m)
	}

	done := bulkRun(t, f.runs, "acme", runs.StatusCompleted)
	const forkKey = "k-preclaim-fork-0123456789ab"
	if r, m := f.do(t, ev("POST", forkPath(done.ID), "acme", forkKey, `{"mode":"replay"}`)); r.StatusCode != 201 {
		t.Fatalf("a fork: %d %v", r.StatusCode, m)
	}
	if r, m := f.do(t, ev("POST", forkPath(done.ID), "acme", forkKey, `{"mode":"bogus"}`)); r.StatusCode != 400 || m["error"] != "validation_error" {
		t.Errorf("the fork's key with a bad mode: %d %v, want 400 validation_error", r.StatusCode, m)
	}
	if r, m := f.do(t, ev("POST", forkPath(done.ID), "acme", forkKey, `{"mode":"replay"}`)); r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("the fork's key with its first body: %d %v %v, want its replay", r.StatusCode, r.Headers, m)
	}
}

// TestBodyRefusalKeepsTheERPPolicyHeaders: under the ERP policy, which
// adds its headers to every guarded answer, a createRun body refused for
// itself is still answered under the claim (RED_TEAM 522), with them, as
// before: an answer before the claim would lack them.
func TestBodyRefusalKeepsTheERPPolicyHeaders(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{BodyTenantField: "tenantId", Policy: erp.Policy, Routes: kit.Layer1Routes()}, nil)
	e := ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","bogus":1}`)
	for k, v := range map[string]any{"clientId": "erp-client", "companyId": "C100", "organizationId": "ORG-1"} {
		e.RequestContext.Authorizer.Lambda[k] = v
	}
	r, m := f.do(t, e)
	if r.StatusCode != 400 || m["error"] != "validation_error" || header.First(r.Headers, erp.HeaderReplayed) != "false" {
		t.Fatalf("a refused body under the ERP policy: %d %v %v, want 400 validation_error with %s: false", r.StatusCode, r.Headers, m, erp.HeaderReplayed)
	}
}
