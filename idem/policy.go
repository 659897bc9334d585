package idem

import (
	"fmt"
	"github.com/idemkit/idemkit/idem/canon"
	"strings"
	"time"
)

// Policy is everything that differs between two idempotency policies: the
// key grammar, what scopes a key, which outcomes are cached, how long a
// record is kept, the headers of a guarded response, the in-flight answer
// and the error body. The protocol itself (claim, lease, fencing, wait,
// replay) is the same under every policy.
//
// Three presets ship: PolicyOpenWOP (the default), commerce.Policy (the
// commerce platform's policy, package idem/policy/commerce) and erp.Policy
// (the ERP service's policy, package idem/policy/erp); PolicyNamed looks
// one up by name. A policy of your own is one
// value:
//
//	p := idem.PolicyOpenWOP
//	p.Name = "partner"
//	p.Key = idem.KeyPolicy{Name: "partner", MinLen: 16, MaxLen: 64, Allow: idem.Chars("A-Z", "0-9", "-")}
//	g, err := idem.New(idem.Config{Store: s, Tenant: t, Policy: p})
//
// New validates the policy (Validate) and reports each bad field in a
// *ConfigError. Treat a preset as read-only: copy it, then change the copy.
type Policy struct {
	// Name identifies the policy in configuration, discovery and errors:
	// 1..32 of a-z 0-9 and '-'. Required.
	Name string

	// Key is the key grammar. Required: Key.Allow set and
	// 1 <= Key.MinLen <= Key.MaxLen.
	Key KeyPolicy

	// Scope says what, besides the key, separates one record from another.
	// The authenticated tenant (Config.Tenant) always does.
	Scope ScopeParts

	// Cache decides what a handler's response does to the record: kept and
	// replayed, released for a retry, or forgotten. code is the "error"
	// member of a JSON error envelope body ("" when there is none); it is
	// read only for statuses >= 400 (decoded from gzip or deflate). For a
	// body in a coding the Guard cannot read (br, zstd) the code is
	// unknown, and the decision never rests on it: Cache's answer for the
	// status with no code, unless Cache answers that status otherwise for
	// some code of the OpenWOP registry or idemkit's own, in which case the
	// least final of its answers (Retry, else Forget). Required. A handler that returns an
	// error or panics (no response at all) always leaves the record
	// retryable, whatever Cache says.
	Cache func(status int, code string) Disposition

	// Retention is the default time a record is kept after its claim and
	// after its completion (Config.Retention, which says more, overrides
	// it); Forever means no expiry. Required.
	Retention time.Duration

	// MinRetention is the smallest finite Config.Retention accepted.
	// Default (0) one second.
	MinRetention time.Duration

	// Headers adds the policy's headers to the response of every guarded
	// request (a mutating request on a route that is not opted out, with
	// idempotency enabled), whatever its outcome: first executions, replays,
	// requests without a key and every error answer. h uses canonical header
	// names. Default nil: no headers.
	Headers func(h map[string][]string, a Answer)

	// InFlight is the answer to a duplicate that gives up waiting for the
	// first request: 409 with Retry-After.
	InFlight InFlightAnswer

	// Canonical picks what is hashed for the digest of a request on a
	// route with a Contract: it returns the canonical bytes of the
	// decoded, validated request and its resolved scope, which the Guard
	// hashes (SHA-256, canon.RecipeCanonical) into the record's digest. It must
	// be deterministic and include everything that makes two requests
	// different work, and nothing else (no request id, timestamp,
	// credential secret, remote address, User-Agent or Accept). Default
	// nil: canon.Default.
	Canonical func(canon.Request) ([]byte, error)

	// ErrorBody renders the body of every error answer the Guard writes
	// itself (not the handler's). Default nil: the OpenWOP envelope
	// {error, message, details?} with the registry code.
	ErrorBody func(ErrorInfo) []byte

	// RequestIDMember names a top-level member of JSON object bodies that
	// carries the request id. On every answer the Guard builds from a
	// handler's response — the first execution's and every replay — a JSON
	// body that has this member gets it set to the current request's id
	// (before Contract.Render), so a replay never carries the first
	// attempt's id; the rest of the body is kept byte for byte and the
	// stored response is the handler's. Default "": bodies as stored.
	RequestIDMember string

	// Replay says what a replay renders: the stored response
	// (ReplayResponse) or, on a route that loads it (Request.Object), the
	// current state of the object the key's first execution created
	// (ReplayObject). Default ReplayResponse.
	Replay ReplayRender

	// RequestIDHeader names a response header that carries the current
	// request's id on every answer of a host under the policy: the Guard
	// sets it on every answer it builds for a guarded request (and every
	// error envelope it writes gains RequestIDMember); a host marks the
	// answers it produces outside Layer 1 the same way (the reference
	// host's api handler does). It must be a header name (Validate
	// refuses another). Default "": none.
	RequestIDHeader string

	// DerivedKeys allows routes whose key is derived from the request
	// (Route.DeriveKey) instead of read from the caller's Idempotency-Key
	// header. Default false, as in every preset: the OpenWOP and ERP
	// policies require the header, and under the commerce policy the
	// caller's SDK sends a key with every durable call and a call without
	// one stores nothing. Set it on a policy of your own for an API whose
	// callers send no key.
	DerivedKeys bool

	// KeepRawBodyHash stores the SHA-256 of each request's raw body beside
	// its digest (Record.RawBodySHA256), for archive: the write that ends
	// an attempt (its completion, or the release of a failed one) stores
	// it, and it is never compared. Default false, as in the OpenWOP and
	// commerce presets: the body is hashed only for the digest, once. The
	// ERP policy sets it (its raw_body_sha256); it costs a second pass over
	// a body that is not already in its canonical form (about 0.5 µs per
	// KB) on every attempt that runs.
	KeepRawBodyHash bool
}

// ScopeParts says which parts of a request, besides the key and the
// authenticated tenant, compose a record's scope. Two requests share a
// record only when every part is equal.
type ScopeParts struct {
	// Credential names further credential values that scope a key, in
	// order: authorizer context keys when Config.Tenant is AuthorizerKey,
	// JWT claims when it is JWTClaim, Config.HTTPCredential for the
	// net/http middleware. An authenticated guarded request with a key that
	// lacks one of them is answered 401 unauthenticated and records
	// nothing; the Guard logs a warning naming the part it lacks. Where
	// authentication is disabled — Config.Tenant is SingleTenant, or an
	// anonymous request under AnonymousTenant — an absent value is the
	// empty (anonymous) one. Default none.
	Credential []string

	// Operation puts the canonical operation (the method and route, after
	// Config.Operations) in the scope: the same key on two operations names
	// two records. On a route that serves every method (an HTTP API
	// "ANY /path" or "$default" route key, a ServeMux pattern without a
	// method) the request's method is put beside it (but for POST, whose
	// records keep the route's scope they had before), so the same key with
	// two methods names two records there too. When false, a key is scoped
	// by the credential alone and the same key on another operation, or
	// with another method, is 409 idempotency_key_mismatch (the method and
	// the operation are always part of the request fingerprint).
	Operation bool
}

// Disposition is what a handler's outcome does to the record
// (Policy.Cache).
type Disposition int

const (
	// Replay keeps the outcome as final (completed below 400,
	// terminal-failure from 400) and replays it to every later request with
	// the key.
	Replay Disposition = iota
	// Retry releases the record as retryable-failure: never replayed; the
	// next request with the key runs the handler again.
	Retry
	// Forget deletes the record: the request leaves nothing behind.
	Forget
)

// Answer describes a guarded response for Policy.Headers.
type Answer struct {
	// Replay says whether the response came from the record.
	Replay bool
	// Key is the valid key, or "" when the request had none or an invalid
	// one (an invalid key is never echoed).
	Key string
	// RequestID is this request's id.
	RequestID string
	// OriginalRequestID is the request id of the first claim, or "" when it
	// is this request.
	OriginalRequestID string
}

// InFlightAnswer is the 409 in-flight answer's Retry-After.
type InFlightAnswer struct {
	// RetryAfter is the default of Config.InFlightRetryAfter: the poll
	// interval a client is told while the first request's owner is alive.
	// 1 s..60 s. Required.
	RetryAfter time.Duration
	// Fixed always answers RetryAfter. When false, a duplicate of a request
	// whose owner looks dead is told the time until its lease can be
	// reclaimed instead (at least RetryAfter).
	Fixed bool
	// NoWait answers a duplicate of a still-pending request at once with
	// the in-flight answer, without holding it on the first request
	// (Config.Wait is not used): the ERP policy, whose callers wait the
	// Retry-After and retry. Default false: the duplicate waits up to
	// Config.Wait for the first request's outcome.
	NoWait bool
	// ModeHeader, when set, names the request header by which a caller
	// says how a duplicate of a still-pending request waits (the commerce
	// policy: commerce.HeaderMode, "Idempotency-Mode"). Its values, in any letter
	// case: ModeSync (also the answer when the header is absent) waits for
	// the first request's outcome up to the call's budget (Config.Wait,
	// capped by the request's deadline less Config.WaitMargin), then is
	// answered as ModeAsync is (Guard.Once, which has no response to give,
	// returns ErrInFlight); ModeAsync is answered at once, without waiting,
	// with 202 Accepted, Retry-After, the policy's replay headers and the
	// pending action (the route's object where it loads one, else
	// {"status": "pending", "requestId": <the first request's id>}). Any other value (an empty one
	// included: a header sent empty is present, as an empty Idempotency-Key
	// is), or the header repeated, is 400
	// validation_error (details.field names the header) and records
	// nothing. The mode is not part of the request fingerprint: it says
	// how to wait, not what to do. It must be a header name other than
	// Idempotency-Key (Policy.Validate refuses another). Default "": every
	// duplicate waits as ModeSync.
	ModeHeader string
}

// ErrorInfo is an error answer written by the Guard, for Policy.ErrorBody.
type ErrorInfo struct {
	// Status is the HTTP status.
	Status int
	// Code is the OpenWOP registry code (idempotency_key_invalid,
	// idempotency_key_mismatch, idempotency_in_flight, unauthenticated,
	// validation_error, internal_error, ...): a policy with codes of its own
	// maps it.
	Code string
	// Message is the human-readable text.
	Message string
	// Details holds machine-readable details, or nil.
	Details map[string]any
	// RequestID is this request's id.
	RequestID string
}

// Validate reports every bad field of p as a *ConfigError whose problems
// name the field ("Policy.Key.MaxLen ..."), or nil.
func (p Policy) Validate() error {
	if probs := p.problems(); len(probs) > 0 {
		return &ConfigError{Problems: probs}
	}
	return nil
}

func (p Policy) problems() []string {
	var out []string
	if !validPolicyName(p.Name) {
		out = append(out, fmt.Sprintf("Policy.Name %q must be 1..32 of a-z 0-9 -", p.Name))
	}
	for _, kp := range p.Key.problems() {
		out = append(out, "Policy.Key"+kp)
	}
	for i, c := range p.Scope.Credential {
		if strings.TrimSpace(c) == "" {
			out = append(out, fmt.Sprintf("Policy.Scope.Credential[%d] is empty", i))
		}
	}
	if p.Cache == nil {
		out = append(out, "Policy.Cache is required")
	}
	switch {
	case p.Retention == 0:
		out = append(out, "Policy.Retention is required (idem.Forever for no expiry)")
	case p.Retention < 0 && p.Retention != Forever:
		out = append(out, fmt.Sprintf("Policy.Retention %s is negative (use idem.Forever for no expiry)", p.Retention))
	case p.Retention != Forever && p.Retention < p.minRetention():
		out = append(out, fmt.Sprintf("Policy.Retention %s is below Policy.MinRetention %s", p.Retention, p.minRetention()))
	}
	if p.MinRetention < 0 {
		out = append(out, "Policy.MinRetention must be >= 0")
	}
	if p.Replay != ReplayResponse && p.Replay != ReplayObject {
		out = append(out, fmt.Sprintf("Policy.Replay %d is not ReplayResponse or ReplayObject", p.Replay))
	}
	if ra := p.InFlight.RetryAfter; ra < time.Second || ra > time.Minute {
		out = append(out, fmt.Sprintf("Policy.InFlight.RetryAfter %s is outside 1s..1m", ra))
	}
	if h := p.RequestIDHeader; h != "" && !validHeaderName(h) {
		out = append(out, fmt.Sprintf("Policy.RequestIDHeader %q is not a header name", h))
	}
	switch h := p.InFlight.ModeHeader; {
	case h == "":
	case !validHeaderName(h):
		out = append(out, fmt.Sprintf("Policy.InFlight.ModeHeader %q is not a header name", h))
	case strings.EqualFold(h, HeaderKey):
		out = append(out, fmt.Sprintf("Policy.InFlight.ModeHeader %q is the key's own header", h))
	}
	return out
}

func validPolicyName(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (p Policy) minRetention() time.Duration {
	if p.MinRetention > 0 {
		return p.MinRetention
	}
	return time.Second
}

// isZero reports whether p is the zero Policy (Config's default).
func (p Policy) isZero() bool {
	return p.Name == "" && p.Key.Allow == nil && p.Key.MinLen == 0 && p.Key.MaxLen == 0 &&
		len(p.Scope.Credential) == 0 && !p.Scope.Operation && p.Cache == nil && p.Retention == 0 &&
		p.MinRetention == 0 && p.Headers == nil && p.InFlight == (InFlightAnswer{}) && p.Canonical == nil && p.ErrorBody == nil &&
		p.RequestIDMember == "" && p.Replay == ReplayResponse && p.RequestIDHeader == "" && !p.DerivedKeys
}
