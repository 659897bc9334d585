package idem_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// Every user of an Amazon Cognito identity pool calls as one role session
// (assumed-role/ROLE/CognitoIdentityCredentials); the request context tells
// them apart by their identity id. Under idem.IAMPrincipal() the tenant
// includes it, so two identity-pool users sending one Idempotency-Key are
// two records, and neither is answered the other's replay, on every adapter
// IAMPrincipal serves: HTTPAPI and Do (HTTP API, payload 2.0) and REST.
// Without an identity id the record id is what it always was (pinned).
// RED_TEAM 490.
const (
	poolRole = "arn:aws:sts::123456789012:assumed-role/AppUsers/CognitoIdentityCredentials"
	poolUser = "us-east-1:11111111-1111-4111-8111-111111111111"
	poolPeer = "us-east-1:22222222-2222-4222-8222-222222222222"
)

// iamV2 is a SigV4-signed HTTP API request from role session arn, as the
// identity-pool user identityID ("" for none), whose body names who sent it.
func iamV2(arn, identityID, who string) events.APIGatewayV2HTTPRequest {
	ev := v2event("POST", "POST /runs", testKey, `{"from":"`+who+`"}`)
	iam := &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		UserARN: arn, CallerID: "AROAEXAMPLE:CognitoIdentityCredentials", AccountID: "123456789012"}
	iam.CognitoIdentity.IdentityID = identityID
	if identityID != "" {
		iam.CognitoIdentity.IdentityPoolID = "us-east-1:pool"
		iam.CognitoIdentity.AMR = []string{"authenticated"}
	}
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: iam}
	return ev
}

// iamV1 is iamV2 for a REST API.
func iamV1(arn, identityID, who string) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs", Path: "/runs",
		Headers: map[string]string{"Idempotency-Key": testKey, "Content-Type": "application/json"},
		Body:    `{"from":"` + who + `"}`,
		RequestContext: events.APIGatewayProxyRequestContext{RequestID: "req-" + randID(),
			Identity: events.APIGatewayRequestIdentity{UserArn: arn, Caller: "AROAEXAMPLE:CognitoIdentityCredentials",
				CognitoIdentityID: identityID}}}
}

func TestIAMPrincipalIdentityPoolUsersAreTwoTenants(t *testing.T) {
	echo := func(calls *int, body string) (int, string) { *calls++; return 201, `{"for":` + body + `}` }
	adapters := []struct {
		name string
		// call sends the request of user identityID (body names who) and
		// returns the answer's status, body and replay header.
		call func(e *env, calls *int, identityID, who string) (int, string, string)
		op   string
	}{
		{"HTTPAPI", func(e *env, calls *int, id, who string) (int, string, string) {
			r, err := e.guard.HTTPAPI(func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				s, b := echo(calls, ev.Body)
				return events.APIGatewayV2HTTPResponse{StatusCode: s, Body: b}, nil
			})(context.Background(), iamV2(poolRole, id, who))
			if err != nil {
				t.Fatal(err)
			}
			return r.StatusCode, r.Body, r.Headers["Openwop-Idempotent-Replay"]
		}, "POST /runs"},
		{"Do", func(e *env, calls *int, id, who string) (int, string, string) {
			ev := iamV2(poolRole, id, who)
			r, err := e.guard.Do(context.Background(), idem.Request{Event: ev}, func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
				s, b := echo(calls, ev.Body)
				return events.APIGatewayV2HTTPResponse{StatusCode: s, Body: b}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return r.StatusCode, r.Body, r.Headers["Openwop-Idempotent-Replay"]
		}, "POST /runs"},
		{"REST", func(e *env, calls *int, id, who string) (int, string, string) {
			r, err := e.guard.REST(func(_ context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				s, b := echo(calls, ev.Body)
				return events.APIGatewayProxyResponse{StatusCode: s, Body: b}, nil
			})(context.Background(), iamV1(poolRole, id, who))
			if err != nil {
				t.Fatal(err)
			}
			return r.StatusCode, r.Body, r.Headers["Openwop-Idempotent-Replay"]
		}, "POST /runs"},
	}
	for _, a := range adapters {
		t.Run(a.name+"/two identity-pool users are two records", func(t *testing.T) {
			e := newEnv(t, func(c *idem.Config) { c.Tenant = idem.IAMPrincipal() })
			calls := 0
			if s, _, _ := a.call(e, &calls, poolUser, "user"); s != 201 {
				t.Fatalf("first user: %d", s)
			}
			s, body, replay := a.call(e, &calls, poolPeer, "peer")
			if s != 201 || replay == "true" || body != `{"for":{"from":"peer"}}` || calls != 2 {
				t.Fatalf("the second identity-pool user, same role session and key: %d %q replay=%q calls=%d; want its own 201, the handler run twice",
					s, body, replay, calls)
			}
			if e.store.Len() != 2 {
				t.Fatalf("records %d, want 2", e.store.Len())
			}
			// The same user's retry is still its own replay.
			s, body, replay = a.call(e, &calls, poolUser, "user")
			if s != 201 || replay != "true" || body != `{"for":{"from":"user"}}` || calls != 2 {
				t.Fatalf("the first user's retry: %d %q replay=%q calls=%d", s, body, replay, calls)
			}
			// The tenant is the role session and the identity id, a space
			// apart (pinned: another form would change every such record id).
			for _, id := range []string{poolUser, poolPeer} {
				if _, ok, _ := e.store.Get(context.Background(), scopeID(poolRole+" "+id, a.op, testKey), e.clock.Now()); !ok {
					t.Fatalf("no record under the tenant %q", poolRole+" "+id)
				}
			}
		})
		t.Run(a.name+"/without an identity id the record id is unchanged", func(t *testing.T) {
			e := newEnv(t, func(c *idem.Config) { c.Tenant = idem.IAMPrincipal() })
			calls := 0
			a.call(e, &calls, "", "user")
			if _, ok, _ := e.store.Get(context.Background(), scopeID(poolRole, a.op, testKey), e.clock.Now()); !ok || e.store.Len() != 1 {
				t.Fatalf("the record of a request without an identity id is not where it was: len=%d", e.store.Len())
			}
			// A request of the same role session with an identity id is
			// another tenant than the session without one.
			if s, _, replay := a.call(e, &calls, poolUser, "user"); s != 201 || replay == "true" || calls != 2 {
				t.Fatalf("an identity-pool user was answered the bare session's record: %d replay=%q calls=%d", s, replay, calls)
			}
		})
	}
}

// TenantV2 and TenantV1 read the identity id beside the principal: the
// user ARN, else the caller id.
func TestIAMPrincipalTenantNamesTheIdentityID(t *testing.T) {
	src := idem.IAMPrincipal()
	v2 := iamV2(poolRole, poolUser, "")
	if got := src.TenantV2(&v2.RequestContext); got != poolRole+" "+poolUser {
		t.Fatalf("TenantV2 = %q", got)
	}
	v2.RequestContext.Authorizer.IAM.UserARN = ""
	if got := src.TenantV2(&v2.RequestContext); got != "AROAEXAMPLE:CognitoIdentityCredentials "+poolUser {
		t.Fatalf("TenantV2 by caller id = %q", got)
	}
	v1 := iamV1(poolRole, poolUser, "")
	if got := src.TenantV1(&v1.RequestContext); got != poolRole+" "+poolUser {
		t.Fatalf("TenantV1 = %q", got)
	}
	v1.RequestContext.Identity.UserArn = ""
	if got := src.TenantV1(&v1.RequestContext); got != "AROAEXAMPLE:CognitoIdentityCredentials "+poolUser {
		t.Fatalf("TenantV1 by caller id = %q", got)
	}
	// An identity id without a principal is no tenant (401), as before.
	v1.RequestContext.Identity.Caller = ""
	if got := src.TenantV1(&v1.RequestContext); got != "" {
		t.Fatalf("TenantV1 with an identity id alone = %q, want no tenant", got)
	}
	v2.RequestContext.Authorizer.IAM.CallerID = ""
	if got := src.TenantV2(&v2.RequestContext); got != "" {
		t.Fatalf("TenantV2 with an identity id alone = %q, want no tenant", got)
	}
	// Without an identity id: the principal alone, as it always was.
	v2 = iamV2(poolRole, "", "")
	v1 = iamV1(poolRole, "", "")
	if a, b := src.TenantV2(&v2.RequestContext), src.TenantV1(&v1.RequestContext); a != poolRole || b != poolRole {
		t.Fatalf("without an identity id: %q %q", a, b)
	}
}
