package idem

import (
	"fmt"
	"math"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// tenantKind says where the authenticated tenant comes from (TenantSource.Kind). The zero value
// is no choice at all: New rejects a Config whose Tenant was not set (unless
// HTTPTenant is), so a guard never silently answers every keyed request
// 401 unauthenticated.
type tenantKind int

const (
	// tenantUnset is the zero value: no tenant source chosen. New rejects it
	// with a ConfigError naming the options.
	tenantUnset tenantKind = iota
	// tenantAuthorizerKey reads a Lambda authorizer context key:
	// RequestContext.Authorizer.Lambda[Name] (HTTP API) or
	// RequestContext.Authorizer[Name] (REST). See AuthorizerKey.
	tenantAuthorizerKey
	// tenantJWTClaim reads a JWT claim: RequestContext.Authorizer.JWT.Claims
	// (HTTP API) or RequestContext.Authorizer["claims"] (REST, Cognito). See
	// JWTClaim.
	tenantJWTClaim
	// tenantIAMPrincipal uses the IAM caller: the user ARN (or, without one,
	// the caller id) of a SigV4-signed request. See IAMPrincipal.
	tenantIAMPrincipal
	// tenantSingle puts every request in one tenant, Name: for a function
	// that has no authorizer and serves a single tenant. Every caller then
	// shares one keyspace (a key is scoped by operation and key only). See
	// SingleTenant.
	tenantSingle
)

// IsSet reports whether s names a tenant source (Kind is not the zero
// value, which New rejects unless Config.HTTPTenant is set).
func (s TenantSource) IsSet() bool { return s.Kind != tenantUnset }

// Single returns the configured tenant of a SingleTenant source, and false
// for every other source.
func (s TenantSource) Single() (tenant string, ok bool) {
	return s.Name, s.Kind == tenantSingle
}

// TenantSource configures tenant resolution. The tenant always comes from
// the credential (or, for tenantSingle, from the configuration), never from
// the body. Build one with AuthorizerKey, JWTClaim, IAMPrincipal or
// SingleTenant.
type TenantSource struct {
	// Kind is where the tenant is read. Required: the zero value
	// (tenantUnset) is rejected by New unless Config.HTTPTenant is set.
	Kind tenantKind
	// Name is the authorizer context key or JWT claim (default "tenantId"),
	// or, for tenantSingle, the tenant itself (required).
	Name string
}

// AuthorizerKey reads the tenant from the Lambda authorizer context key name
// (the reference host's authorizer sets "tenantId"): a string, a boolean,
// or a number that is an integer below 2^53 in magnitude; a larger or
// fractional number is no tenant (401), since the event's double cannot
// tell two such ids apart.
func AuthorizerKey(name string) TenantSource {
	return TenantSource{Kind: tenantAuthorizerKey, Name: name}
}

// JWTClaim reads the tenant from the JWT claim name (a JWT or Cognito
// authorizer), e.g. "sub" or "custom:tenant".
func JWTClaim(name string) TenantSource {
	return TenantSource{Kind: tenantJWTClaim, Name: name}
}

// IAMPrincipal uses the IAM caller of a SigV4-signed request (IAM
// authorization) as the tenant: its user ARN, else its caller id, and,
// when the request carries an Amazon Cognito identity id (a user of an
// identity pool: HTTP API requestContext.authorizer.iam.cognitoIdentity.identityId,
// REST requestContext.identity.cognitoIdentityId), that id too, a space
// after the principal: every user of an identity pool calls as one role
// session (CognitoIdentityCredentials), and the identity id tells them
// apart. Without an identity id an assumed role's tenant is its role
// session, whose name whoever assumes the role chooses: every caller that
// holds the role can name any session, so the role's sessions are then
// one party's to share. Where the users of one role are different parties
// and no identity pool names them, take the tenant from a per-user
// authorizer (JWTClaim, AuthorizerKey).
func IAMPrincipal() TenantSource {
	return TenantSource{Kind: tenantIAMPrincipal}
}

// SingleTenant puts every request, from any adapter, in the one tenant
// named tenant: the choice for a function without an authorizer. Keys are
// then shared by every caller of the function, so use it only where all
// callers are one party (or the function's own infrastructure, such as a
// queue).
func SingleTenant(tenant string) TenantSource {
	return TenantSource{Kind: tenantSingle, Name: tenant}
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
	case tenantUnset:
		if !httpTenant {
			return tenantChoices
		}
	case tenantAuthorizerKey, tenantJWTClaim, tenantIAMPrincipal:
	case tenantSingle:
		if s.Name == "" {
			return `Tenant: idem.SingleTenant needs a non-empty tenant name, e.g. idem.SingleTenant("my-service")`
		}
	default:
		return fmt.Sprintf("Tenant.Kind %d is unknown; %s", s.Kind, tenantChoices)
	}
	return ""
}

// scalar renders an authorizer context value; objects and arrays are not
// tenants. Nor is a number the decoded double may not hold exactly: the
// Lambda runtime decodes a JSON number of the event into a float64, which
// holds an integer exactly only below 2^53, so 9007199254740993 and
// 9007199254740992 (or 0.1 and 0.10000000000000000001) arrive as one
// value, and two tenants (or credential parts) would share a scope and one
// another's answers. Such a number is "" (no tenant: 401 unauthenticated);
// an authorizer sends such ids as strings.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		if v != math.Trunc(v) || math.Abs(v) >= 1<<53 {
			return ""
		}
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
	return s.tenantV2(rc.Authorizer)
}

// tenantV2 is TenantV2 from the request context's authorizer a.
func (s TenantSource) tenantV2(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) string {
	if s.Kind == tenantSingle {
		return s.Name
	}
	if a == nil {
		return ""
	}
	switch s.Kind {
	case tenantAuthorizerKey:
		return scalar(a.Lambda[s.name()])
	case tenantJWTClaim:
		if a.JWT != nil {
			return a.JWT.Claims[s.name()]
		}
	case tenantIAMPrincipal:
		if a.IAM != nil {
			return iamTenant(a.IAM.UserARN, a.IAM.CallerID, a.IAM.CognitoIdentity.IdentityID)
		}
	}
	return ""
}

// TenantV1 resolves the tenant of a REST API (v1 proxy) request.
func (s TenantSource) TenantV1(rc *events.APIGatewayProxyRequestContext) string {
	switch s.Kind {
	case tenantSingle:
		return s.Name
	case tenantAuthorizerKey:
		return scalar(rc.Authorizer[s.name()])
	case tenantJWTClaim:
		switch c := rc.Authorizer["claims"].(type) {
		case map[string]any:
			return scalar(c[s.name()])
		case map[string]string:
			return c[s.name()]
		}
	case tenantIAMPrincipal:
		return iamTenant(rc.Identity.UserArn, rc.Identity.Caller, rc.Identity.CognitoIdentityID)
	}
	return ""
}

// iamTenant is the tenant of an IAM caller: its user ARN, else its caller
// id, followed, when the request carries an Amazon Cognito identity id (an
// identity pool's user, RED_TEAM 490), by a space and that id. Every user
// of an identity pool calls as one role session, so without the id they
// would be one tenant and be answered one another's replays.
//
// The space cannot occur in the principal, so the tenant of a caller with
// an identity id never equals one without (nor another principal's with
// another id): an ARN's parts are drawn from printable ASCII without the
// space (IAM paths from '!' to DEL, IAM user, role and session names from
// letters, digits and +=,.@_-), and a caller id is a unique id (letters
// and digits) or one and a session name joined by ':'. A principal's first
// space therefore ends it. A caller without an identity id keeps the
// principal alone, its tenant (and record ids) unchanged. No principal is
// no tenant, whatever identity id the context carries.
func iamTenant(userARN, callerID, identityID string) string {
	p := userARN
	if p == "" {
		p = callerID
	}
	if p == "" || identityID == "" {
		return p
	}
	return p + " " + identityID
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
		if g.cfg.Tenant.Kind == tenantUnset {
			panic("idem: Guard." + adapter + " needs Config.Tenant: " + tenantChoices)
		}
	}
}

// credentialV2 reads the credential value name (Policy.Scope.Credential)
// from an HTTP API request: an authorizer context key under
// tenantAuthorizerKey, a JWT claim under tenantJWTClaim, else "": a is the
// request context's authorizer.
func (s TenantSource) credentialV2(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription, name string) string {
	return TenantSource{Kind: s.Kind, Name: name}.credential(func(t TenantSource) string { return t.tenantV2(a) })
}

// credentialV1 is credentialV2 for a REST API request.
func (s TenantSource) credentialV1(rc *events.APIGatewayProxyRequestContext, name string) string {
	return TenantSource{Kind: s.Kind, Name: name}.credential(func(t TenantSource) string { return t.TenantV1(rc) })
}

func (s TenantSource) credential(read func(TenantSource) string) string {
	switch s.Kind {
	case tenantAuthorizerKey, tenantJWTClaim:
		return read(s)
	}
	return ""
}
