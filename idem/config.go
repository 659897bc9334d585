package idem

import (
	"fmt"
	"github.com/idemkit/idemkit/idem/canon"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/internal/clock"
)

// Config's defaults and bounds, the request and response size limits, and
// the reserved keyspaces. The lease bounds are the ERP policy's
// (IDEMPOTENCY_PROCESSING_LEASE_SECONDS is 30..3600).
const (
	// Forever is the Retention value meaning "never expire" (the commerce platform's policy). Records
	// are then written without a TTL attribute.
	Forever time.Duration = -1

	// Config's defaults and bounds. The lease bounds are the ERP policy's
	// (IDEMPOTENCY_PROCESSING_LEASE_SECONDS is 30..3600).

	MinLease          = 30 * time.Second
	MaxLease          = 3600 * time.Second
	DefaultLease      = 300 * time.Second
	DefaultLeaseSkew  = 10 * time.Second
	DefaultWait       = 5 * time.Second
	DefaultWaitMargin = 250 * time.Millisecond

	// DefaultStoreTimeout is Config.StoreTimeout's default: the longest one
	// store call made for a request may take when nothing nearer (the
	// request's deadline, the claim's lease) bounds it.
	DefaultStoreTimeout = 10 * time.Second

	// MaxRequestBytes is the largest request body the net/http middleware reads
	// (Lambda's 6 MB payload limit); a larger body is answered
	// 413 payload_too_large.
	MaxRequestBytes = 6 << 20

	// MaxResponseBytes is the largest response body every Store must store and
	// replay byte-exactly: Lambda's 6 MB synchronous payload limit. A larger
	// final response (or Guard.Once value) is answered to its caller and
	// recorded as not kept (Response.NotKept): its duplicates are answered
	// 410 CodeResponseNotKept (Guard.Once: ErrNotKept), never run again.
	// Its headers have 1 MB of room beside the body on every store (see
	// Outcome.Validate); a response with more is recorded as not kept too.
	// So, through the API Gateway adapters (HTTPAPI, REST, Do) inside a
	// Lambda invocation (the context carries a lambdacontext, as under
	// `idemkit dev`), is a body within it whose answer Lambda cannot
	// return: a payload (the body base64-encoded or JSON-escaped, with the
	// headers) within 8 KB of Lambda's 6 MB, which API Gateway answers 502
	// however often it is retried. Its own caller gets that 502, its
	// duplicates the 410.
	MaxResponseBytes = 6 << 20

	// AnonymousTenantID is the tenant of unauthenticated requests under
	// AnonymousTenant. Authenticated tenants are scoped as "tenant:"+id, so the
	// two never collide.
	AnonymousTenantID = "anon:"
)

// Config configures a Guard. Every field documents its default; New
// validates the whole struct and reports every problem at once.
type Config struct {
	// Store persists records. Required.
	Store Store

	// Policy is the idempotency policy: key grammar, scope, what is cached,
	// default retention, response headers, in-flight answer and error body
	// (see Policy). Default PolicyOpenWOP (the zero Policy). New validates
	// it and names every bad field.
	Policy Policy

	// Disabled turns idempotency off: every request runs the handler directly
	// and no header is added (IDEMPOTENCY_ENABLED=false). Default false.
	Disabled bool

	// Required makes a missing key on a mutating request a
	// 400 idempotency_key_invalid with details {"reason":"missing"}: the
	// OpenWOP registry has no "missing key" code. Default false: a request
	// without a key runs without deduplication.
	Required bool

	// Lease is the claim lease (the ERP policy's "processing lease",
	// IDEMPOTENCY_PROCESSING_LEASE_SECONDS), renewed by a heartbeat every
	// Heartbeat while the handler runs. Must be in MinLease..MaxLease.
	// Default DefaultLease (300 s). Inside Lambda (the context carries a
	// lambdacontext and a deadline) it is honoured too, capped by the
	// invocation's remaining time plus LeaseSkew: an invocation that ends
	// before Lease is up holds the capped lease with no heartbeat; one that
	// may outlive Lease holds Lease and renews it like any other process.
	Lease time.Duration

	// Heartbeat is the lease renewal interval (inside Lambda only when the
	// invocation may outlive Lease). Default Lease/3, which 0 also means;
	// must be positive, and leave before the end of Lease the renewal
	// margin (a quarter of Heartbeat, at most 1 s) and 100 ms for the
	// first renewal's store call, which must fail before the lease ends
	// when it stalls (a negative value is refused).
	Heartbeat time.Duration

	// LeaseSkew is added to the Lambda remaining time to absorb clock skew
	// between Lambda hosts. Default DefaultLeaseSkew (10 s), which 0 also
	// means (no skew cannot be configured); a negative value is refused.
	LeaseSkew time.Duration

	// Retention is how long a record is kept: from the write that claims it
	// (each reclaim starts it again) and from its completion; a heartbeat's
	// renewal and a release do not extend it, and a handler still running
	// when it would end has its context cut (ErrLeaseLost) first. Default
	// Policy.Retention (24 h for PolicyOpenWOP, the OpenWOP v2 core spec's
	// minimum; 720 h for erp.Policy; Forever for commerce.Policy). Forever
	// means no expiry. A finite value below Policy.MinRetention (24 h for
	// PolicyOpenWOP, else one second) is rejected.
	Retention time.Duration

	// Wait bounds how long a duplicate waits for the winner's final outcome
	// before answering 409 idempotency_in_flight. The context deadline (the
	// Lambda deadline) bounds it as well, less WaitMargin. Default
	// DefaultWait (5 s); a negative value disables waiting.
	Wait time.Duration

	// WaitMargin is kept free before the context deadline to write the 409,
	// and to write the 503 of a store call that did not answer (see
	// StoreTimeout). Default DefaultWaitMargin (250 ms), which 0 also means; a
	// negative value is refused.
	WaitMargin time.Duration

	// StoreTimeout bounds every store call made for a request: the claim,
	// the polls of a duplicate's wait, the heartbeat's renewals and the
	// completion, release or delete after the handler. Each call's deadline
	// is the earliest of StoreTimeout from its start, the request context's
	// deadline (the Lambda deadline, `idemkit dev`'s request timeout) less
	// WaitMargin, and, for the writes after the claim, the end of the
	// claim's lease; never less than 100 ms. The completion, release and
	// delete run without the request's cancellation (a client that hangs up
	// loses no outcome) but under this bound.
	//
	// Guarantee: a store that stalls or cannot be reached never holds a
	// request past that bound. The request is answered 503
	// idemkit.store_unavailable (CodeStoreUnavailable) with Retry-After in
	// the policy's error body, and nothing is lost: a completion that could
	// not be written leaves the record claimed, so a retry with the same key
	// gets what the lease and fence rules give (in flight while the lease
	// lives, the replay if the completion landed after all, a reclaim once
	// the lease has ended); one that carried Transact writes, none of which
	// committed unless the completion did, is released (fenced) so that a
	// retry runs again. One without them whose write of the record was
	// never sent (Store.Complete's ErrRecordNotSent: a large response's
	// part beside the record not written, or stalled) is recorded as not
	// kept instead, in a call bounded the same way, so that the handler
	// does not run again. Default DefaultStoreTimeout (10 s), which 0 also
	// means; a negative value is refused.
	// Outside Lambda, keep it (plus the handler's time) below the server's
	// WriteTimeout so that the 503 reaches the client.
	StoreTimeout time.Duration

	// InFlightRetryAfter is the Retry-After of a 409 idempotency_in_flight
	// while the request's owner is alive — it claimed or renewed its lease
	// within the last two Heartbeat intervals — so a client polls again
	// soon and gets the answer when it is ready. When the owner looks dead
	// (no lease write for longer), Retry-After is the time until its lease
	// can be reclaimed instead (at least InFlightRetryAfter). Rounded up to
	// whole seconds; 1 s..60 s. Default Policy.InFlight.RetryAfter (1 s;
	// 2 s under erp.Policy, whose in-flight answers always carry it:
	// Policy.InFlight.Fixed).
	InFlightRetryAfter time.Duration

	// Tenant says where the authenticated tenant comes from:
	// AuthorizerKey("tenantId"), JWTClaim(name) or IAMPrincipal() for API
	// Gateway events, or SingleTenant(name) for a function without an
	// authorizer. Required (no default): New reports a ConfigError naming
	// these options when it is unset, unless HTTPTenant is set.
	Tenant TenantSource

	// HTTPTenant resolves the tenant for the net/http middleware: ok
	// false means the request has no tenant, whatever string is returned
	// with it (the claim of a token that failed verification is never
	// taken), and a keyed request is then answered 401 unless
	// Unauthenticated is AnonymousTenant. Default:
	// the single tenant under SingleTenant; otherwise none, and then
	// Middleware and Handle panic when called (a wiring error, reported at
	// start-up rather than as a 401 on every request), unless Unauthenticated
	// is AnonymousTenant or idempotency is Disabled.
	HTTPTenant func(*http.Request) (tenant string, ok bool)

	// HTTPCredential reads a credential value named in
	// Policy.Scope.Credential for the net/http middleware ("" when the
	// request has none). Default nil: required only when the policy names
	// credential parts and the guard serves net/http.
	HTTPCredential func(r *http.Request, name string) string

	// Unauthenticated decides what happens to a mutating request that
	// carries a key but no tenant. Default RejectUnauthenticated
	// (401 unauthenticated).
	Unauthenticated UnauthenticatedPolicy

	// BodyTenantField names a top-level member of JSON bodies holding a
	// tenant. When present and different from the credential's tenant the
	// request, with or without an Idempotency-Key, is answered 403
	// forbidden (details.reason "tenant_mismatch"), the handler does not
	// run and no record is written. Default "" (no check).
	BodyTenantField string

	// Operations maps a routed operation (HTTP API routeKey such as
	// "POST /runs", REST "POST /runs/{runId}/cancel", or the net/http
	// pattern) to a canonical operation id. Unmapped operations use the
	// routed operation itself. Default nil.
	Operations map[string]string

	// Routes holds per-operation options, keyed by canonical operation id
	// (after Operations mapping). Default nil.
	Routes map[string]Route

	// Normalize is the default normalisation hook for JSON bodies. Default
	// nil (RFC 8785 canonical form only).
	Normalize *canon.Normalizer

	// HTTPOperation resolves the routed operation for the net/http
	// middleware. Default: the request's ServeMux pattern (Request.Pattern).
	// The raw path is never used.
	HTTPOperation func(*http.Request) string

	// Logger receives JSON log lines (with request_id). Default slog JSON to
	// os.Stderr at Info. Keys appear only as keyed hashes ("kh:…", see
	// KeyHashSecret): error texts of handlers and stores are logged with
	// every occurrence of the raw key replaced by its hash.
	Logger *slog.Logger

	// KeyHashSecret keys the hashes that stand for idempotency keys in the
	// logs. Set the same secret on every instance (IDEMPOTENCY_KEY_HASH_SECRET)
	// and one key hashes the same everywhere, so a poison message or a
	// retried request can be followed across Lambda instances; the hash
	// still cannot be reversed without the secret. Default "": a random
	// salt per process (hashes correlate within one process only).
	KeyHashSecret string

	// Metrics receives the counters (see Metrics). Default nil (no
	// metrics); Lambda functions pass emf.New(os.Stdout, namespace).
	Metrics Metrics

	// TracerProvider receives a span per claim, completion and replay of
	// a keyed request (OpenTelemetry API; each with the operation, the
	// key's hash and the outcome). Default nil: no spans (a no-op). To use
	// the provider installed globally, pass otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// Test holds the hooks only tests set (the clock). Default zero.
	Test TestConfig
}

// Route is a per-operation option set.
type Route struct {
	// Skip opts the route out of idempotency entirely: the key is neither
	// required, validated, claimed nor replayed, and no header is added
	// (the ERP policy's format-validation test route). Default false.
	Skip bool
	// JSON treats the body as JSON even without a JSON Content-Type. Default
	// false (the Content-Type decides).
	JSON bool
	// Normalize overrides Config.Normalize for this route. Default nil.
	Normalize *canon.Normalizer
	// Contract, if set, is the route's request contract: a keyed request's
	// digest is then its canonical request hash (decoded, normalised,
	// validated, with the resolved scope; see Contract), and responses are
	// rendered per Accept when the contract has Render. It replaces JSON,
	// Normalize and the body part of the fingerprint. Default nil.
	Contract *Contract
	// Headers names request headers that select or change the work on this
	// route (a currency, an account, a content language). Their values, in
	// order, become part of the request fingerprint, so the same key with a
	// different value is 409 idempotency_key_mismatch. Names are matched
	// case-insensitively; Idempotency-Key cannot be listed. Cookie is read
	// from an HTTP API event's cookies list, where API Gateway puts it,
	// and Host from the net/http request's Host, where Go's server puts
	// it: declare Host on the routes of applications one Guard serves
	// behind a host switch (a ServeMux or chi router per host, chi's
	// RouteHeaders), and the header a header-routed route is chosen by.
	// Default nil: no header is part of the fingerprint.
	Headers []string
	// DeriveKey, if set, derives the route's idempotency key from the
	// request, for APIs whose callers send no Idempotency-Key: body is the
	// decoded request body, header returns a request header's values (name
	// in any letter case), this request's own even when kept and called
	// after DeriveKey returns. A typical DeriveKey returns a member of the body
	// (an order id) or a header the API already has (a message id).
	//
	// Available only under a policy with Policy.DerivedKeys (New refuses it
	// otherwise with a *ConfigError). A derived key has the guarantees of a
	// caller's key — the same tenant, credential and operation scope, the
	// same request digest (the same derived key with a different request is
	// 409 idempotency_key_mismatch), the same claim, wait and replay — in a
	// keyspace of its own: a derived key never meets a caller's
	// Idempotency-Key of the same value. It is not checked against
	// Policy.Key (it never travels in the header), is never logged or
	// echoed in a response header, and Config.Required does not apply.
	//
	// On such a route a request that carries an Idempotency-Key is answered
	// 400 idempotency_key_invalid (details.reason "not_accepted") and runs
	// nothing: the derived key is the route's one identity of a request,
	// so one business event cannot run once per keyspace. An empty key or
	// an error from DeriveKey (the request lacks the value) is 400
	// validation_error (details.reason "missing") and records nothing; the
	// error's text is never shown or logged. Default nil: the key is the
	// caller's Idempotency-Key header.
	DeriveKey func(body []byte, header func(name string) []string) (string, error)
}

// UnauthenticatedPolicy decides what happens to requests with no tenant.
type UnauthenticatedPolicy int

const (
	// RejectUnauthenticated answers 401 unauthenticated (the default).
	RejectUnauthenticated UnauthenticatedPolicy = iota
	// AnonymousTenant scopes unauthenticated requests to the tenant
	// AnonymousTenantID ("anon:"), a keyspace no authenticated tenant can
	// share.
	AnonymousTenant
)

// ConfigError lists every problem New found in a Config.
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string {
	return "idem: invalid config: " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// withDefaults returns c with defaults filled in and validates it.
func (c Config) withDefaults() (Config, error) {
	var p []string
	if c.Store == nil {
		p = append(p, "Store is required")
	}
	if c.Policy.isZero() {
		c.Policy = PolicyOpenWOP
	}
	p = append(p, c.Policy.problems()...)
	if len(c.Policy.Scope.Credential) > 0 && c.HTTPCredential == nil &&
		c.Tenant.Kind != tenantAuthorizerKey && c.Tenant.Kind != tenantJWTClaim && c.Tenant.Kind != tenantSingle {
		p = append(p, "Policy.Scope.Credential needs a credential to read: Tenant idem.AuthorizerKey or idem.JWTClaim, or HTTPCredential (or idem.SingleTenant: no authentication, every part anonymous)")
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	} else if c.Lease < MinLease || c.Lease > MaxLease {
		p = append(p, fmt.Sprintf("Lease %s is outside %s..%s", c.Lease, MinLease, MaxLease))
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.Lease / 3
	} else if c.Heartbeat < 0 || c.Heartbeat >= c.Lease {
		p = append(p, fmt.Sprintf("Heartbeat %s must be positive and below Lease %s", c.Heartbeat, c.Lease))
	} else if room := clock.RenewMargin(c.Heartbeat) + minStoreCall; c.Heartbeat+room > c.Lease {
		p = append(p, fmt.Sprintf("Heartbeat %s leaves no time to renew Lease %s: the first renewal must be able to end %s before the lease does", c.Heartbeat, c.Lease, clock.RenewMargin(c.Heartbeat)))
	}
	if c.LeaseSkew == 0 {
		c.LeaseSkew = DefaultLeaseSkew
	} else if c.LeaseSkew < 0 {
		p = append(p, "LeaseSkew must not be negative (0 means the default)")
	}
	switch {
	case c.Retention == 0:
		c.Retention = c.Policy.Retention
	case c.Retention == Forever:
	case c.Retention < 0:
		p = append(p, fmt.Sprintf("Retention %s is negative (use idem.Forever for no expiry)", c.Retention))
	case c.Retention < c.Policy.minRetention():
		p = append(p, fmt.Sprintf("Retention %s is below the %s policy's minimum of %s", c.Retention, c.Policy.Name, c.Policy.minRetention()))
	}
	if c.Retention > 0 && c.Retention < c.Lease {
		p = append(p, fmt.Sprintf("Retention %s is below Lease %s: a record would end, and its key be claimed again, while its claim's lease is live", c.Retention, c.Lease))
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	switch {
	case c.InFlightRetryAfter == 0:
		c.InFlightRetryAfter = c.Policy.InFlight.RetryAfter
	case c.InFlightRetryAfter < time.Second || c.InFlightRetryAfter > time.Minute:
		p = append(p, fmt.Sprintf("InFlightRetryAfter %s is outside 1s..1m", c.InFlightRetryAfter))
	}
	if c.WaitMargin == 0 {
		c.WaitMargin = DefaultWaitMargin
	} else if c.WaitMargin < 0 {
		p = append(p, "WaitMargin must not be negative (0 means the default)")
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	} else if c.StoreTimeout < 0 {
		p = append(p, "StoreTimeout must not be negative (0 means the default)")
	}
	if tp := c.Tenant.problem(c.HTTPTenant != nil); tp != "" {
		p = append(p, tp)
	} else if c.Tenant.Kind == tenantSingle && c.HTTPTenant == nil {
		single := c.Tenant.Name
		c.HTTPTenant = func(*http.Request) (string, bool) { return single, true }
	}
	if c.Unauthenticated != RejectUnauthenticated && c.Unauthenticated != AnonymousTenant {
		p = append(p, fmt.Sprintf("Unauthenticated %d is unknown", c.Unauthenticated))
	}
	var empty []string
	for routed, op := range c.Operations {
		if routed == "" || op == "" {
			empty = append(empty, fmt.Sprintf("%q -> %q", routed, op))
		}
	}
	sort.Strings(empty)
	for _, e := range empty {
		p = append(p, "Operations entry "+e+": routed operation and operation id must be non-empty")
	}
	routes := make(map[string]Route, len(c.Routes))
	for op, r := range c.Routes {
		if r.Contract != nil {
			if err := r.Contract.validate(); err != nil {
				p = append(p, fmt.Sprintf("Routes[%q].Contract: %v", op, err))
			}
		}
		if r.Normalize != nil {
			if err := r.Normalize.Validate(); err != nil {
				p = append(p, fmt.Sprintf("Routes[%q].Normalize: %v", op, err))
			}
		}
		for _, h := range r.Headers {
			switch {
			case !validHeaderName(h):
				p = append(p, fmt.Sprintf("Routes[%q].Headers: %q is not a header name", op, h))
			case strings.EqualFold(h, HeaderKey):
				p = append(p, fmt.Sprintf("Routes[%q].Headers: %s is the scope, not part of the fingerprint", op, HeaderKey))
			}
		}
		if r.DeriveKey != nil && !c.Policy.DerivedKeys {
			p = append(p, fmt.Sprintf("Routes[%q].DeriveKey: the %s policy requires the caller's %s header (Policy.DerivedKeys is false)", op, c.Policy.Name, HeaderKey))
		}
		r.Headers = canonicalHeaders(r.Headers)
		routes[op] = r
	}
	if c.Routes != nil {
		c.Routes = routes
	}
	if c.Normalize != nil {
		if err := c.Normalize.Validate(); err != nil {
			p = append(p, "Normalize: "+err.Error())
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if c.Test.Clock == nil {
		c.Test.Clock = clock.System{}
	}
	if len(p) > 0 {
		return c, &ConfigError{Problems: p}
	}
	return c, nil
}
