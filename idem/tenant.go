package idem

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// TenantKind says where the authenticated tenant comes from. The zero value
// is no choice at all: New rejects a Config whose Tenant was not set (unless
// HTTPTenant is), so a guard never silently answers every keyed request
// 401 unauthenticated.
type TenantKind int

const (
	// TenantUnset is the zero value: no tenant source chosen. New rejects it
	// with a ConfigError naming the options.
	TenantUnset TenantKind = iota
	// TenantAuthorizerKey reads a Lambda authorizer context key:
	// RequestContext.Authorizer.Lambda[Name] (HTTP API) or
	// RequestContext.Authorizer[Name] (REST). See AuthorizerKey.
	TenantAuthorizerKey
	// TenantJWTClaim reads a JWT claim: RequestContext.Authorizer.JWT.Claims
	// (HTTP API) or RequestContext.Authorizer["claims"] (REST, Cognito). See
	// JWTClaim.
	TenantJWTClaim
	// TenantIAMPrincipal uses the IAM caller: the user ARN (or, without one,
	// the caller id) of a SigV4-signed request. See IAMPrincipal.
	TenantIAMPrincipal
	// TenantSingle puts every request in one tenant, Name: for a function
	// that has no authorizer and serves a single tenant. Every caller then
	// shares one keyspace (a key is scoped by operation and key only). See
	// SingleTenant.
	TenantSingle
)

// TenantSource configures tenant resolution. The tenant always comes from
// the credential (or, for TenantSingle, from the configuration), never from
// the body. Build one with AuthorizerKey, JWTClaim, IAMPrincipal or
// SingleTenant.
type TenantSource struct {
	// Kind is where the tenant is read. Required: the zero value
	// (TenantUnset) is rejected by New unless Config.HTTPTenant is set.
	Kind TenantKind
	// Name is the authorizer context key or JWT claim (default "tenantId"),
	// or, for TenantSingle, the tenant itself (required).
	Name string
}

// AuthorizerKey reads the tenant from the Lambda authorizer context key name
// (the reference host's authorizer sets "tenantId").
func AuthorizerKey(name string) TenantSource {
	return TenantSource{Kind: TenantAuthorizerKey, Name: name}
}

// JWTClaim reads the tenant from the JWT claim name (a JWT or Cognito
// authorizer), e.g. "sub" or "custom:tenant".
func JWTClaim(name string) TenantSource {
	return TenantSource{Kind: TenantJWTClaim, Name: name}
}

// IAMPrincipal uses the IAM caller of a SigV4-signed request (IAM
// authorization) as the tenant.
func IAMPrincipal() TenantSource {
	return TenantSource{Kind: TenantIAMPrincipal}
}

// SingleTenant puts every request, from any adapter, in the one tenant
// named tenant: the choice for a function without an authorizer. Keys are
// then shared by every caller of the function, so use it only where all
// callers are one party (or the function's own infrastructure, such as a
// queue).
func SingleTenant(tenant string) TenantSource {
	return TenantSource{Kind: TenantSingle, Name: tenant}
}

// tenantChoices is the ConfigError text naming the options.
const tenantChoices = "Tenant is required: choose where the authenticated tenant comes from: " +
	`idem.AuthorizerKey("tenantId") (Lambda authorizer context), idem.JWTClaim("sub") (JWT or Cognito authorizer), ` +
	`idem.IAMPrincipal() (IAM authorization), or idem.SingleTenant("my-service") for a function without an authorizer ` +
	"(or set HTTPTenant for a net/http-only guard)"

func (s TenantSource) name() string {
	if s.Name == "" {
		return "tenantId"
	}
	return s.Name
}

// problem returns the ConfigError text for s, or "".
func (s TenantSource) problem(httpTenant bool) string {
	switch s.Kind {
	case TenantUnset:
		if !httpTenant {
			return tenantChoices
		}
	case TenantAuthorizerKey, TenantJWTClaim, TenantIAMPrincipal:
	case TenantSingle:
		if s.Name == "" {
			return `Tenant: idem.SingleTenant needs a non-empty tenant name, e.g. idem.SingleTenant("my-service")`
		}
	default:
		return fmt.Sprintf("Tenant.Kind %d is unknown; %s", s.Kind, tenantChoices)
	}
	return ""
}

// scalar renders an authorizer context value; objects and arrays are not
// tenants.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// TenantV2 resolves the tenant of an HTTP API (payload 2.0) request.
func (s TenantSource) TenantV2(rc *events.APIGatewayV2HTTPRequestContext) string {
	if s.Kind == TenantSingle {
		return s.Name
	}
	a := rc.Authorizer
	if a == nil {
		return ""
	}
	switch s.Kind {
	case TenantAuthorizerKey:
		return scalar(a.Lambda[s.name()])
	case TenantJWTClaim:
		if a.JWT != nil {
			return a.JWT.Claims[s.name()]
		}
	case TenantIAMPrincipal:
		if a.IAM != nil {
			if a.IAM.UserARN != "" {
				return a.IAM.UserARN
			}
			return a.IAM.CallerID
		}
	}
	return ""
}

// TenantV1 resolves the tenant of a REST API (v1 proxy) request.
func (s TenantSource) TenantV1(rc *events.APIGatewayProxyRequestContext) string {
	switch s.Kind {
	case TenantSingle:
		return s.Name
	case TenantAuthorizerKey:
		return scalar(rc.Authorizer[s.name()])
	case TenantJWTClaim:
		switch c := rc.Authorizer["claims"].(type) {
		case map[string]any:
			return scalar(c[s.name()])
		case map[string]string:
			return c[s.name()]
		}
	case TenantIAMPrincipal:
		if rc.Identity.UserArn != "" {
			return rc.Identity.UserArn
		}
		return rc.Identity.Caller
	}
	return ""
}

// requireTenant panics when the guard has no tenant source for adapter
// (called when a handler is wrapped, at start-up): without one, every keyed
// request would be answered 401 unauthenticated. Disabled guards and
// guards that scope unauthenticated requests to AnonymousTenant need none.
func (g *Guard) requireTenant(adapter string) {
	if g.cfg.Disabled || g.cfg.Unauthenticated == AnonymousTenant {
		return
	}
	switch adapter {
	case "net/http":
		if g.cfg.HTTPTenant == nil {
			panic("idem: Guard.Middleware/Handle need a tenant source for net/http requests: set Config.HTTPTenant, or Config.Tenant to idem.SingleTenant(...)")
		}
	default:
		if g.cfg.Tenant.Kind == TenantUnset {
			panic("idem: Guard." + adapter + " needs Config.Tenant: " + tenantChoices)
		}
	}
}

// credentialV2 reads the credential value name (Policy.Scope.Credential)
// from an HTTP API request: an authorizer context key under
// TenantAuthorizerKey, a JWT claim under TenantJWTClaim, else "".
func (s TenantSource) credentialV2(rc *events.APIGatewayV2HTTPRequestContext, name string) string {
	return TenantSource{Kind: s.Kind, Name: name}.credential(func(t TenantSource) string { return t.TenantV2(rc) })
}

// credentialV1 is credentialV2 for a REST API request.
func (s TenantSource) credentialV1(rc *events.APIGatewayProxyRequestContext, name string) string {
	return TenantSource{Kind: s.Kind, Name: name}.credential(func(t TenantSource) string { return t.TenantV1(rc) })
}

func (s TenantSource) credential(read func(TenantSource) string) string {
	switch s.Kind {
	case TenantAuthorizerKey, TenantJWTClaim:
		return read(s)
	}
	return ""
}
