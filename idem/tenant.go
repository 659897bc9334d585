package idem

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// TenantKind says which part of the authorizer context names the tenant.
type TenantKind int

const (
	// TenantAuthorizerKey reads a Lambda authorizer context key:
	// RequestContext.Authorizer.Lambda[Name] (HTTP API) or
	// RequestContext.Authorizer[Name] (REST). The default.
	TenantAuthorizerKey TenantKind = iota
	// TenantJWTClaim reads a JWT claim: RequestContext.Authorizer.JWT.Claims
	// (HTTP API) or RequestContext.Authorizer["claims"] (REST, Cognito).
	TenantJWTClaim
	// TenantIAMPrincipal uses the IAM caller: the user ARN (or, without one,
	// the caller id) of a SigV4-signed request.
	TenantIAMPrincipal
)

// TenantSource configures tenant resolution from API Gateway events. The
// tenant always comes from the credential, never from the body.
type TenantSource struct {
	// Kind is where the tenant is read. Default TenantAuthorizerKey.
	Kind TenantKind
	// Name is the authorizer context key or JWT claim. Default "tenantId".
	Name string
}

func (s TenantSource) name() string {
	if s.Name == "" {
		return "tenantId"
	}
	return s.Name
}

func (s TenantSource) validate() error {
	if s.Kind < TenantAuthorizerKey || s.Kind > TenantIAMPrincipal {
		return fmt.Errorf("Tenant.Kind %d is unknown", s.Kind)
	}
	return nil
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
