package idem

import (
	"time"

	"github.com/idemkit/idemkit/internal/apierr"
)

// The preset policies. Each is one value; see Policy for what a field does.
var (
	// PolicyOpenWOP is the OpenWOP default policy (the OpenWOP v2 core
	// spec), Config's default: key ^[A-Za-z0-9._~-]{22,128}$ (KeyOpenWOP);
	// scope tenant + operation + key; 2xx and final 4xx replayed, 429/5xx
	// retried, 400 idempotency_key_invalid/validation_error, 401 and 403
	// forgotten (CacheOpenWOP); retention 24 h, the spec's minimum; replays
	// carry "OpenWOP-Idempotent-Replay: true"; in-flight Retry-After 1 s
	// while the owner is alive, the seconds until its lease can be reclaimed
	// when it looks dead; the OpenWOP error envelope.
	PolicyOpenWOP = Policy{
		Name:         "openwop",
		Key:          KeyOpenWOP,
		Scope:        ScopeParts{Operation: true},
		Cache:        CacheOpenWOP,
		Retention:    24 * time.Hour,
		MinRetention: 24 * time.Hour,
		Headers:      openWOPHeaders,
		InFlight:     InFlightAnswer{RetryAfter: time.Second},
	}

	// PolicyERP is the ERP service's policy: key 8..128 of
	// A-Z a-z 0-9 . _ : - (KeyERP); scope tenant + client + company +
	// organisation from the credential (CredentialClient, CredentialCompany,
	// CredentialOrganization; empty, the anonymous client, when
	// authentication is disabled: SingleTenant, or an anonymous request under
	// AnonymousTenant) + method and route + key; outcomes cached as
	// PolicyOpenWOP (5xx and handler errors retryable, deterministic business
	// answers replayed); retention 720 h; every guarded response carries
	// "Idempotency-Replayed: true|false", the key echoed in
	// "Idempotency-Key", "Idempotency-Original-Request-ID" and
	// "X-Request-ID"; a duplicate of a pending request is answered at once
	// (never held) and in-flight answers always carry "Retry-After: 2"; error
	// envelopes carry the ERP service's own codes and the current attempt's
	// request_id (ERPErrorBody), and a handler's JSON body with a top-level
	// request_id carries the current attempt's on every answer, replays
	// included (RequestIDMember); on a route with a Contract the digest
	// hashes what CanonicalERP picks.
	PolicyERP = Policy{
		Name: "erp",
		Key:  KeyERP,
		Scope: ScopeParts{
			Credential: []string{CredentialClient, CredentialCompany, CredentialOrganization},
			Operation:  true,
		},
		Cache:           CacheOpenWOP,
		Retention:       720 * time.Hour,
		Headers:         erpHeaders,
		InFlight:        InFlightAnswer{RetryAfter: 2 * time.Second, Fixed: true, NoWait: true},
		Canonical:       CanonicalERP,
		ErrorBody:       ERPErrorBody,
		RequestIDMember: RequestIDMember,
	}

	// PolicyCommerce is the commerce platform's policy: a key is any
	// string of 1..255 characters (KeyCommerce); it belongs to one
	// namespace and one calling worker, both read from the credential
	// (Scope.Credential CredentialNamespace, CredentialWorker: authorizer
	// context keys or JWT claims, never the request), beside the tenant;
	// the operation is not in the scope but in the fingerprint, so the same
	// key on a different operation or input is 409 with the policy's own
	// code CodeIdempotencyMismatch and nothing runs; a request rejected at
	// the door (400, 401, 403, 429) records nothing, and every other
	// outcome, a 5xx included, is final and replayed as it was
	// (CacheCommerce: a failed action replays as failed, the key never
	// runs again); records held forever (no expiry attribute, so neither
	// TTL nor the sweeper ever deletes one); replays carry
	// "Idempotent-Replayed: true"; a duplicate of a pending request waits
	// as its Idempotency-Mode header says (HeaderMode: sync waits up to its
	// budget, async gets the pending action at once); in-flight
	// Retry-After as PolicyOpenWOP; the OpenWOP envelope, with the
	// policy's code for a mismatch (commerceErrorBody).
	PolicyCommerce = Policy{
		Name:      "commerce",
		Key:       KeyCommerce,
		Scope:     ScopeParts{Credential: []string{CredentialNamespace, CredentialWorker}},
		Cache:     CacheCommerce,
		Retention: Forever,
		Headers:   commerceHeaders,
		InFlight:  InFlightAnswer{RetryAfter: time.Second, ModeHeader: HeaderMode},
		ErrorBody: commerceErrorBody,
	}
)

// CacheOpenWOP is the OpenWOP default's Policy.Cache: 429 and 5xx are
// retried (never replayed); 401, 403 and a 400 whose envelope code is
// idempotency_key_invalid or validation_error are forgotten (the request was
// rejected before any work); every other outcome — 1xx..3xx and the other
// 4xx — is replayed.
func CacheOpenWOP(status int, code string) Disposition {
	switch {
	case status == 429 || status >= 500:
		return Retry
	case status == 401 || status == 403:
		return Forget
	case status == 400 && (code == apierr.CodeIdempotencyKeyInvalid || code == apierr.CodeValidation):
		return Forget
	}
	return Replay
}

// The credential values that scope a key under the commerce policy
// (PolicyCommerce.Scope.Credential): authorizer context keys (or JWT
// claims) set from the caller's credential, never from the request.
const (
	CredentialNamespace = "namespace"
	CredentialWorker    = "worker"
)

// CodeIdempotencyMismatch is the commerce policy's code for a key reused on
// a different operation or input (HTTP 409; the OpenWOP default's
// idempotency_key_mismatch).
const CodeIdempotencyMismatch = "idempotency-mismatch"

// CacheCommerce is the commerce policy's Policy.Cache: a request rejected
// at the door, 400, 401, 403 or 429, records nothing (Forget), so the same
// key later runs fresh; every other outcome, 1xx..3xx, the other 4xx and
// every 5xx, is final and replayed (a failed action replays as failed).
// A handler error or panic (no response) still leaves the record retryable,
// as under every policy.
func CacheCommerce(status int, _ string) Disposition {
	switch status {
	case 400, 401, 403, 429:
		return Forget
	}
	return Replay
}

// commerceErrorBody is the OpenWOP envelope with the commerce policy's code
// for a mismatch (CodeIdempotencyMismatch; the registry code it stands for
// in details.openwopCode); every other answer keeps its registry code.
func commerceErrorBody(e ErrorInfo) []byte {
	if e.Code == apierr.CodeIdempotencyKeyMismatch {
		d := make(map[string]any, len(e.Details)+1)
		for k, v := range e.Details {
			d[k] = v
		}
		d["openwopCode"] = e.Code
		e.Code, e.Details = CodeIdempotencyMismatch, d
	}
	return OpenWOPErrorBody(e)
}

// OpenWOPErrorBody is the default Policy.ErrorBody: the OpenWOP envelope
// {error, message, details?} with the registry code.
func OpenWOPErrorBody(e ErrorInfo) []byte {
	return (&apierr.Error{Code: e.Code, Message: e.Message, Details: e.Details}).Body()
}

func openWOPHeaders(h map[string][]string, a Answer) {
	if a.Replay {
		h[HeaderOpenWOPReplay] = []string{"true"}
	}
}

func commerceHeaders(h map[string][]string, a Answer) {
	if a.Replay {
		h[HeaderIdempotentReplay] = []string{"true"}
	}
}

func erpHeaders(h map[string][]string, a Answer) {
	if a.Replay {
		h[HeaderReplayed] = []string{"true"}
	} else {
		h[HeaderReplayed] = []string{"false"}
	}
	if a.Key != "" {
		h[HeaderKey] = []string{a.Key}
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
