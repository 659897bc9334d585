// Package erp is the ERP service's idempotency policy, a preset of
// package idem: Policy (its key grammar Key, scope, headers, in-flight
// answer, error body, request-id member and canonical form) and the names
// it defines. Importing the package registers the policy under the name
// "erp" (idem.PolicyNamed, IDEMPOTENCY_POLICY=erp).
package erp

import (
	"encoding/json"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/internal/apierr"
)

func init() { idem.RegisterPolicy(Policy) }

// The ERP service's policy: its key grammar, scope, headers, in-flight
// answer, error body, request-id member and canonical form.
var (
	// Policy is the ERP service's policy: key 8..128 of
	// A-Z a-z 0-9 . _ : - (Key); scope tenant + client + company +
	// organisation from the credential (CredentialClient, CredentialCompany,
	// CredentialOrganization; empty, the anonymous client, when
	// authentication is disabled: idem.SingleTenant, or an anonymous request under
	// idem.AnonymousTenant) + method and route + key; outcomes cached as
	// idem.PolicyOpenWOP (408, 429, 499, 5xx, a 409 in progress in either
	// spelling and handler errors retryable, deterministic business
	// answers replayed: cacheERP); retention 720 h; every guarded response carries
	// "Idempotency-Replayed: true|false", the key echoed in
	// "Idempotency-Key", "Idempotency-Original-Request-ID" and
	// "X-Request-ID"; a duplicate of a pending request is answered at once
	// (never held) and in-flight answers always carry "Retry-After: 2"; error
	// envelopes carry the ERP service's own codes and the current attempt's
	// request_id ({error, message, details?, request_id}: error is
	// IDEMPOTENCY_REQUEST_IN_PROGRESS for idempotency_in_flight,
	// IDEMPOTENCY_KEY_CONFLICT with MessageKeyConflict for
	// idempotency_key_mismatch, the OpenWOP registry code otherwise), and a handler's JSON body with a top-level
	// request_id carries the current attempt's on every answer, replays
	// included (RequestIDMember); every answer of a host, the ones outside
	// Layer 1 included, carries X-Request-ID and every envelope its request_id
	// (idem.Policy.RequestIDHeader and RequestIDMember); on a route with a Contract the digest
	// hashes the RFC 8785 form of {"company_id", "organization_id",
	// "contract_version", "request"} (its Canonical: the client, the method
	// and the route separate records through the scope instead, and no
	// request id, timestamp, credential, remote IP, User-Agent or Accept
	// reaches it).
	Policy = idem.Policy{
		Name: "erp",
		Key:  Key,
		Scope: idem.ScopeParts{
			Credential: []string{CredentialClient, CredentialCompany, CredentialOrganization},
			Operation:  true,
		},
		Cache:           cacheERP,
		Retention:       720 * time.Hour,
		Headers:         erpHeaders,
		InFlight:        idem.InFlightAnswer{RetryAfter: 2 * time.Second, Fixed: true, NoWait: true},
		Canonical:       canonicalERP,
		ErrorBody:       erpErrorBody,
		RequestIDMember: RequestIDMember,
		RequestIDHeader: HeaderRequestID,
		KeepRawBodyHash: true,
	}

	// Key is the ERP service's policy: 8..128 characters of A-Z a-z 0-9 . _ : -
	// (case-sensitive; leading or trailing whitespace rejected where the
	// adapter sees the raw header: API Gateway events and `idemkit dev`'s
	// gateway, which hands each request its own header lines as received;
	// not behind the plain net/http middleware, whose server trims it).
	Key = idem.KeyPolicy{Name: "erp", MinLen: 8, MaxLen: 128, Allow: idem.Chars("A-Z", "a-z", "0-9", "._:-")}
)

func erpHeaders(h map[string][]string, a idem.Answer) {
	if a.Replay {
		h[HeaderReplayed] = []string{"true"}
	} else {
		h[HeaderReplayed] = []string{"false"}
	}
	if a.Key != "" {
		h[idem.HeaderKey] = []string{a.Key}
	}
	orig := a.OriginalRequestID
	if orig == "" {
		orig = a.RequestID
	}
	h[HeaderOriginalRequestID] = []string{orig}
	if a.RequestID != "" {
		h[HeaderRequestID] = []string{a.RequestID}
	}
}

// cacheERP is Policy's idem.Policy.Cache: idem.PolicyOpenWOP's, which
// releases a 409 idempotency_in_flight, and a 409 in the policy's own
// spelling of it, CodeRequestInProgress, too: a handler passing on the
// answer of an ERP service it forwarded the key to, still processing it,
// says "not yet", which a replay would answer for the retention
// (RED_TEAM 431).
func cacheERP(status int, code string) idem.Disposition {
	if status == 409 && code == CodeRequestInProgress {
		return idem.Retry
	}
	return idem.PolicyOpenWOP.Cache(status, code)
}

// erpCodes maps the OpenWOP registry codes the ERP policy has codes of its
// own for to those codes, with the policy's text where it prescribes one.
var erpCodes = map[string]struct{ code, message string }{
	apierr.CodeIdempotencyInFlight:    {code: CodeRequestInProgress},
	apierr.CodeIdempotencyKeyMismatch: {code: CodeKeyConflict, message: MessageKeyConflict},
}

// erpEnvelope is the ERP policy's error envelope, in member order.
type erpEnvelope struct {
	Error     string         `json:"error"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details,omitempty"`
	RequestID string         `json:"request_id"`
}

// erpErrorBody is Policy's idem.Policy.ErrorBody: the envelope
// {error, message, details?, request_id}. error is the ERP policy's own
// code where it defines one (IDEMPOTENCY_REQUEST_IN_PROGRESS for
// idempotency_in_flight, IDEMPOTENCY_KEY_CONFLICT with its prescribed
// message for idempotency_key_mismatch) and the OpenWOP registry code
// otherwise (the policy defines no code for an invalid or missing key, an
// unauthenticated request or a refused body); request_id is always the
// current attempt's request id.
func erpErrorBody(e idem.ErrorInfo) []byte {
	env := erpEnvelope{Error: e.Code, Message: e.Message, Details: e.Details, RequestID: e.RequestID}
	if c, ok := erpCodes[e.Code]; ok {
		env.Error = c.code
		if c.message != "" {
			env.Message = c.message
		}
	}
	b, err := json.Marshal(env)
	if err != nil { // details that do not marshal: the envelope without them
		env.Details = nil
		b, _ = json.Marshal(env)
	}
	return b
}

// canonicalERP is the ERP policy's idem.Policy.Canonical: the RFC 8785 form of
// {"company_id", "organization_id", "contract_version", "request"} — the
// resolved company and organisation (the tenant), the endpoint contract
// version and the normalised contract — and nothing the policy excludes
// (request id, timestamps, Authorization, tokens, remote IP, User-Agent,
// Accept never reach it; the client, the method and the route separate
// records through the scope instead).
func canonicalERP(c canon.Request) ([]byte, error) {
	return canon.Marshal(map[string]any{
		"company_id":       c.Scope.Credential[CredentialCompany],
		"organization_id":  c.Scope.Credential[CredentialOrganization],
		"contract_version": c.ContractVersion,
		"request":          c.Request,
	})
}

// The ERP policy's names: its response headers, the credential values that
// scope a key, its error codes and their prescribed text, and the
// request-id member.
const (
	// Response headers the ERP policy sets on every guarded response
	// (erpHeaders), beside the key echoed in idem.HeaderKey.

	HeaderReplayed          = "Idempotency-Replayed"
	HeaderOriginalRequestID = "Idempotency-Original-Request-Id"
	HeaderRequestID         = "X-Request-Id"

	// Credential names of the ERP policy's scope (idem.Policy.Scope.Credential):
	// authorizer context keys (or JWT claims, or names passed to
	// idem.Config.HTTPCredential) carrying the calling client (the authenticated
	// principal), and the company and organisation it acts for (the tenant the
	// canonical request hash includes).

	CredentialClient       = "clientId"
	CredentialCompany      = "companyId"
	CredentialOrganization = "organizationId"

	// The ERP policy's error codes: the "error" member of the Guard's own
	// envelopes under Policy, in place of the OpenWOP registry code.

	// CodeRequestInProgress is 409 while another request owns an active
	// processing lease on the key (OpenWOP idempotency_in_flight).
	CodeRequestInProgress = "IDEMPOTENCY_REQUEST_IN_PROGRESS"
	// CodeKeyConflict is 409 for the same scope and key with a different
	// canonical payload (OpenWOP idempotency_key_mismatch).
	CodeKeyConflict = "IDEMPOTENCY_KEY_CONFLICT"

	// MessageKeyConflict is the ERP policy's text of CodeKeyConflict.
	MessageKeyConflict = "The Idempotency-Key has already been used with a different request payload."

	// RequestIDMember is the envelope member the ERP policy sets to the current
	// attempt's request id (idem.Policy.RequestIDMember).
	RequestIDMember = "request_id"
)
