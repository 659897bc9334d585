package authfn

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/functions/host/apikeys"
)

type brokenKeys struct{ apikeys.KeyStore }

func (brokenKeys) Tenant(context.Context, string) (string, bool, error) {
	return "", false, errors.New("throttled")
}

func TestAuthorizer(t *testing.T) {
	keys := apikeys.NewMemKeys()
	key := apikeys.NewAPIKey()
	if err := keys.PutKey(context.Background(), key, "acme"); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h := &Handler{Keys: keys, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	ok := events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + key}}
	r, err := h.Handle(context.Background(), ok)
	if err != nil || !r.IsAuthorized || r.Context[ContextTenantKey] != "acme" {
		t.Fatalf("%+v %v", r, err)
	}
	// identitySource form, scheme in any case
	r, err = h.Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{IdentitySource: []string{"bearer " + key}})
	if err != nil || r.Context[ContextTenantKey] != "acme" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, v := range []string{"", "Bearer", "Bearer ", "Basic " + key, key, "Bearer " + key + "x", "Bearer a b", "Bearer " + strings.Repeat("k", 600)} {
		_, err := h.Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"Authorization": v}})
		if !errors.Is(err, ErrUnauthorized) || err.Error() != "Unauthorized" {
			t.Errorf("%q: %v", v, err)
		}
	}
	if strings.Contains(logs.String(), key) {
		t.Fatal("a raw API key reached the logs")
	}
	// A store failure is never an authorization, and never a 401 either.
	h.Keys = brokenKeys{}
	_, err = h.Handle(context.Background(), ok)
	if err == nil || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("store failure: %v", err)
	}
}

// TestAuthorizerPassesCredentialAttributes: a key's credential attributes
// reach the authorizer context beside tenantId, each under its own name;
// a key without attributes carries the tenant alone.
func TestAuthorizerPassesCredentialAttributes(t *testing.T) {
	ctx := context.Background()
	keys := apikeys.NewMemKeys()
	with, plain := apikeys.NewAPIKey(), apikeys.NewAPIKey()
	if err := keys.PutCredential(ctx, with, apikeys.Credential{Tenant: "acme", Attrs: map[string]string{"namespace": "shop", "worker": "checkout"}}); err != nil {
		t.Fatal(err)
	}
	if err := keys.PutKey(ctx, plain, "acme"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{{"tenantId": "globex"}, {"1x": "v"}, {"worker": ""}, {"worker": "a\nb"}} {
		if err := keys.PutCredential(ctx, apikeys.NewAPIKey(), apikeys.Credential{Tenant: "acme", Attrs: bad}); !errors.Is(err, apikeys.ErrCredentialInvalid) {
			t.Errorf("attributes %v accepted: %v", bad, err)
		}
	}
	h := &Handler{Keys: keys, Logger: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil))}
	r, err := h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + with}})
	if err != nil || len(r.Context) != 3 || r.Context[ContextTenantKey] != "acme" || r.Context["namespace"] != "shop" || r.Context["worker"] != "checkout" {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + plain}})
	if err != nil || len(r.Context) != 1 || r.Context[ContextTenantKey] != "acme" {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestAuthorizationUnderTwoSpellings: an event holding Authorization under
// two spellings with different credentials is refused, every time, never
// authorized as whichever tenant Go's map order met last; the same
// credential under both is that credential (RED_TEAM 384).
func TestAuthorizationUnderTwoSpellings(t *testing.T) {
	keys := apikeys.NewMemKeys()
	a, b := apikeys.NewAPIKey(), apikeys.NewAPIKey()
	if err := keys.PutKey(context.Background(), a, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := keys.PutKey(context.Background(), b, "globex"); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Keys: keys}
	for i := 0; i < 32; i++ {
		r, err := h.Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"Authorization": "Bearer " + a, "authorization": "Bearer " + b}})
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("try %d: two credentials authorized as %v (%v); want Unauthorized", i, r.Context[ContextTenantKey], err)
		}
		r, err = h.Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"Authorization": "Bearer " + a, "authorization": "Bearer " + a}})
		if err != nil || r.Context[ContextTenantKey] != "acme" {
			t.Fatalf("try %d: one credential under two spellings: %+v %v", i, r, err)
		}
	}
}
