// Package authfn is the authorizer function's handler: an API Gateway HTTP
// API Lambda authorizer (payload format 2.0, simple responses) for
// `Authorization: Bearer <api key>`.
//
// Keys are looked up by their SHA-256 hash (apikeys.HashKey) in the api-keys
// table; the raw key is never stored or logged (only keyhash.Log). On
// success the response is {isAuthorized: true, context: {tenantId: T, ...}}:
// the key's tenant and each of its credential attributes
// (apikeys.Credential.Attrs, e.g. namespace and worker for the commerce
// policy) under its own name; the api function reads the tenant from that
// context (idem's default TenantSource key "tenantId") and a policy's
// credential parts from the same context. A missing, malformed or unknown key is the
// error "Unauthorized", which API Gateway answers 401; a key-store failure
// is any other error (API Gateway answers 500), never an authorization.
//
// Lambda counts both as function errors (the "Unauthorized" error is how a
// Lambda authorizer refuses with 401), so Handle counts each refusal
// (MetricRefusals): the authorizer-errors alarm watches the function's
// Errors less the refusals, and a caller sending wrong keys never pages.
package authfn

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/ids"
	"github.com/idemkit/idemkit/internal/keyhash"
)

// ContextTenantKey is the authorizer context key carrying the tenant.
const ContextTenantKey = "tenantId"

// MetricRefusals counts the requests Handle refuses with ErrUnauthorized
// (a missing, malformed or unknown key), one per request, no dimensions.
const MetricRefusals = "idemkit.authorizer.refusals_total"

// Metrics receives the authorizer's counts (*emf.Recorder implements it).
type Metrics interface {
	Count(name string, n float64, dims map[string]string)
}

// ErrUnauthorized is the error API Gateway turns into 401 (its message must
// be exactly "Unauthorized").
var ErrUnauthorized = errors.New("Unauthorized")

// Handler authorizes requests. Safe for concurrent use.
type Handler struct {
	// Keys resolves key hashes to tenants. Required.
	Keys apikeys.KeyStore
	// Logger receives decisions (keys as keyhash.Log only). Default
	// slog.Default().
	Logger *slog.Logger
	// Metrics receives MetricRefusals. Optional: nil counts nothing.
	Metrics Metrics
}

// BearerKey extracts the API key from an Authorization header value:
// "Bearer", in any letter case, exactly one space, then the key as
// apikeys.ValidKey accepts it (apikeys.KeyRule: 1..512 printable ASCII
// characters without whitespace). Only spaces and tabs around the whole
// value, which HTTP does not count as part of it, are dropped; any other
// whitespace, a second space or a tab after the scheme, is no such value.
func BearerKey(v string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.Trim(v, " \t"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !apikeys.ValidKey(key) {
		return "", false
	}
	return key, true
}

// Authorize resolves an Authorization header value to a tenant:
// ErrUnauthorized when the key is missing, malformed or unknown.
func (h *Handler) Authorize(ctx context.Context, authorization string) (string, error) {
	c, err := h.AuthorizeCredential(ctx, authorization)
	return c.Tenant, err
}

// AuthorizeCredential resolves an Authorization header value to the key's
// credential: its tenant and, when Keys is an apikeys.CredentialStore, its
// attributes. Errors as Authorize.
func (h *Handler) AuthorizeCredential(ctx context.Context, authorization string) (apikeys.Credential, error) {
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	key, ok := BearerKey(authorization)
	if !ok {
		log.InfoContext(ctx, "authorizer: no bearer key")
		return apikeys.Credential{}, ErrUnauthorized
	}
	var c apikeys.Credential
	var err error
	if cs, isCS := h.Keys.(apikeys.CredentialStore); isCS {
		c, ok, err = cs.Credential(ctx, apikeys.HashKey(key))
	} else {
		c.Tenant, ok, err = h.Keys.Tenant(ctx, apikeys.HashKey(key))
	}
	if err != nil {
		log.ErrorContext(ctx, "authorizer: key store failed", slog.String("key_hash", keyhash.Log(key)), slog.String("error", err.Error()))
		return apikeys.Credential{}, errors.New("authorizer: key store unavailable")
	}
	if !ok || !ids.ValidTenant(c.Tenant) {
		log.InfoContext(ctx, "authorizer: unknown key", slog.String("key_hash", keyhash.Log(key)))
		return apikeys.Credential{}, ErrUnauthorized
	}
	return c, nil
}

// authorization returns the request's Authorization header, or its
// identity source when it has none. ok is false when the event holds the
// header under two spellings with different values: neither is the
// caller's credential (RED_TEAM 384).
func authorization(ev events.APIGatewayV2CustomAuthorizerV2Request) (authz string, ok bool) {
	for i, v := range header.Values(ev.Headers, "Authorization") {
		if i > 0 && v != authz {
			return "", false
		}
		authz = v
	}
	if authz == "" && len(ev.IdentitySource) == 1 {
		authz = ev.IdentitySource[0]
	}
	return authz, true
}

// Handle is the Lambda handler.
func (h *Handler) Handle(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	c, err := apikeys.Credential{}, ErrUnauthorized
	if authz, ok := authorization(ev); ok {
		c, err = h.AuthorizeCredential(ctx, authz)
	}
	if errors.Is(err, ErrUnauthorized) && h.Metrics != nil {
		h.Metrics.Count(MetricRefusals, 1, nil)
	}
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	ctxv := make(map[string]any, 1+len(c.Attrs))
	for _, n := range c.AttrNames() {
		if apikeys.ValidAttr(n, c.Attrs[n]) == nil { // never shadows tenantId
			ctxv[n] = c.Attrs[n]
		}
	}
	ctxv[ContextTenantKey] = c.Tenant
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: true, Context: ctxv}, nil
}
