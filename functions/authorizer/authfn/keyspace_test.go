package authfn

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/apikeys"
)

// handWritten is a key store holding one item as an operator might write
// it by hand, outside PutCredential's checks: any tenant string.
type handWritten struct {
	*apikeys.MemKeys
	tenant string
}

func (h handWritten) Credential(context.Context, string) (apikeys.Credential, bool, error) {
	return apikeys.Credential{Tenant: h.tenant}, true, nil
}

// keyspaceTenants are tenant strings that would meet the host's own
// keyspaces or another tenant's: the runs table's item prefixes (`#`),
// Layer 1's scope prefixes (`tenant:`, `anon:` alone), a runId's `/`, the
// empty tenant, one past the grammar's 128 characters, and confusables of
// "acme" (Cyrillic а, a zero-width space, fullwidth letters, a trailing
// space or NUL).
var keyspaceTenants = []string{
	"", "#", "#inbox#acme", "host#acme", "acme#x", "tenant:acme", "anon:", "acme/x", "/", "acme/",
	strings.Repeat("a", 129), "\u0430cme", "acme\u200b", "ａｃｍｅ", "acme ", "acme\x00",
}

// TestAKeyOfAKeyspaceTenantAuthorizesNothing: an api-keys item whose
// tenant is outside the tenantId grammar is refused Unauthorized (401),
// never granted, whatever it would collide with; PutCredential refuses to
// store such a credential.
func TestAKeyOfAKeyspaceTenantAuthorizesNothing(t *testing.T) {
	ctx := context.Background()
	key := apikeys.NewAPIKey()
	for _, tenant := range keyspaceTenants {
		h := &Handler{Keys: handWritten{apikeys.NewMemKeys(), tenant}}
		v := "Bearer " + key
		r, err := h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": v}, IdentitySource: []string{v}})
		if !errors.Is(err, ErrUnauthorized) || r.IsAuthorized || r.Context != nil {
			t.Errorf("tenant %q: %+v %v, want Unauthorized", tenant, r, err)
		}
		if err := apikeys.NewMemKeys().PutCredential(ctx, key, apikeys.Credential{Tenant: tenant}); !errors.Is(err, apikeys.ErrCredentialInvalid) {
			t.Errorf("PutCredential(tenant %q): %v, want ErrCredentialInvalid", tenant, err)
		}
	}
}
