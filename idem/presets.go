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
	// "X-Request-ID"; in-flight answers always carry "Retry-After: 2"; error
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
		InFlight:        InFlightAnswer{RetryAfter: 2 * time.Second, Fixed: true},
		Canonical:       CanonicalERP,
		ErrorBody:       ERPErrorBody,
		RequestIDMember: RequestIDMember,
	}

	// PolicyCommerce is the commerce platform's policy: keys of up to 255
	// visible characters (KeyCommerce); scope tenant + operation + key;
	// outcomes cached as PolicyOpenWOP; records held forever; replays carry
	// "Idempotent-Replayed: true"; in-flight Retry-After as PolicyOpenWOP;
	// the OpenWOP error envelope.
	PolicyCommerce = Policy{
		Name:      "commerce",
		Key:       KeyCommerce,
		Scope:     ScopeParts{Operation: true},
		Cache:     CacheOpenWOP,
		Retention: Forever,
		Headers:   commerceHeaders,
		InFlight:  InFlightAnswer{RetryAfter: time.Second},
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
