// Package authfn is the authorizer function's handler: an API Gateway HTTP
// API Lambda authorizer (payload format 2.0, simple responses) for
// `Authorization: Bearer <api key>`.
//
// Keys are looked up by their SHA-256 hash (host.HashKey) in the api-keys
// table; the raw key is never stored or logged (only keyhash.Log). On
// success the response is {isAuthorized: true, context: {tenantId: T}}, and
// the api function reads the tenant from that context (idem's default
// TenantSource key "tenantId"). A missing, malformed or unknown key is the
// error "Unauthorized", which API Gateway answers 401; a key-store failure
// is any other error (API Gateway answers 500), never an authorization.
package authfn

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host"
	"github.com/idemkit/idemkit/internal/keyhash"
)

// ContextTenantKey is the authorizer context key carrying the tenant.
const ContextTenantKey = "tenantId"

// ErrUnauthorized is the error API Gateway turns into 401 (its message must
// be exactly "Unauthorized").
var ErrUnauthorized = errors.New("Unauthorized")

// Handler authorizes requests. Safe for concurrent use.
type Handler struct {
	// Keys resolves key hashes to tenants. Required.
	Keys host.KeyStore
	// Logger receives decisions (keys as keyhash.Log only). Default
	// slog.Default().
	Logger *slog.Logger
}

// BearerKey extracts the API key from an Authorization header value:
// "Bearer <key>" (scheme case-insensitive, one space, no inner whitespace).
func BearerKey(v string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	if key == "" || len(key) > 512 || strings.ContainsAny(key, " \t\r\n") {
		return "", false
	}
	return key, true
}

// Authorize resolves an Authorization header value to a tenant:
// ErrUnauthorized when the key is missing, malformed or unknown.
func (h *Handler) Authorize(ctx context.Context, authorization string) (string, error) {
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	key, ok := BearerKey(authorization)
	if !ok {
		log.InfoContext(ctx, "authorizer: no bearer key")
		return "", ErrUnauthorized
	}
	tenant, ok, err := h.Keys.Tenant(ctx, host.HashKey(key))
	if err != nil {
		log.ErrorContext(ctx, "authorizer: key store failed", slog.String("key_hash", keyhash.Log(key)), slog.String("error", err.Error()))
		return "", errors.New("authorizer: key store unavailable")
	}
	if !ok || !host.ValidTenant(tenant) {
		log.InfoContext(ctx, "authorizer: unknown key", slog.String("key_hash", keyhash.Log(key)))
		return "", ErrUnauthorized
	}
	return tenant, nil
}

// Handle is the Lambda handler.
func (h *Handler) Handle(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	var authz string
	for k, v := range ev.Headers {
		if strings.EqualFold(k, "Authorization") {
			authz = v
		}
	}
	if authz == "" && len(ev.IdentitySource) == 1 {
		authz = ev.IdentitySource[0]
	}
	tenant, err := h.Authorize(ctx, authz)
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: true,
		Context:      map[string]any{ContextTenantKey: tenant},
	}, nil
}
