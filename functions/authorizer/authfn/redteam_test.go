package authfn

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/apikeys"
)

// revocableKeys is a CredentialStore whose keys can be removed (as an
// operator deletes a key's item) and whose reads can fail (an outage).
type revocableKeys struct {
	*apikeys.MemKeys
	mu      sync.Mutex
	revoked map[string]bool
	down    bool
}

func (k *revocableKeys) Credential(ctx context.Context, hash string) (apikeys.Credential, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down {
		return apikeys.Credential{}, false, errors.New("ProvisionedThroughputExceededException")
	}
	if k.revoked[hash] {
		return apikeys.Credential{}, false, nil
	}
	return k.MemKeys.Credential(ctx, hash)
}

func TestAuthorizerRedTeam(t *testing.T) {
	ctx := context.Background()
	keys := &revocableKeys{MemKeys: apikeys.NewMemKeys(), revoked: map[string]bool{}}
	ka, kb := apikeys.NewAPIKey(), apikeys.NewAPIKey()
	if err := keys.PutCredential(ctx, ka, apikeys.Credential{Tenant: "acme", Attrs: map[string]string{"namespace": "shop"}}); err != nil {
		t.Fatal(err)
	}
	if err := keys.PutCredential(ctx, kb, apikeys.Credential{Tenant: "globex"}); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Keys: keys}
	ask := func(v string) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		return h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": v}, IdentitySource: []string{v}})
	}
	for _, v := range []string{
		ka, "Bearer", "Bearer" + ka, "Basic " + ka, "Bearer\t" + ka, "Bearer " + ka + "," + "Bearer " + kb,
		"Bearer " + ka + "\x00", "Bearer " + ka + "é", "Bearer " + strings.Repeat("k", 10<<10),
		"Bearer " + ka[:len(ka)-1], "Bearer " + strings.ToUpper(ka), "Bearer " + ka + ",",
	} {
		if r, err := ask(v); !errors.Is(err, ErrUnauthorized) || r.IsAuthorized {
			t.Errorf("%.40q: %+v %v, want Unauthorized", v, r, err)
		}
	}
	r, err := ask("Bearer " + kb)
	if err != nil || r.Context[ContextTenantKey] != "globex" || r.Context["namespace"] != nil {
		t.Fatalf("globex key: %+v %v", r, err)
	}
	keys.down = true
	for _, v := range []string{"Bearer " + ka, "Bearer nosuchkey"} {
		r, err := ask(v)
		if err == nil || errors.Is(err, ErrUnauthorized) || r.IsAuthorized {
			t.Errorf("outage: %+v %v, want a non-Unauthorized error", r, err)
		}
	}
	keys.down = false
	keys.revoked[apikeys.HashKey(ka)] = true
	if r, err := ask("Bearer " + ka); !errors.Is(err, ErrUnauthorized) || r.IsAuthorized {
		t.Fatalf("revoked key: %+v %v", r, err)
	}
}

type countMetrics struct {
	mu sync.Mutex
	n  map[string]float64
}

func (m *countMetrics) Count(name string, n float64, _ map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[name] += n
}

// TestAuthorizerCountsRefusals: each refused request (the "Unauthorized"
// error, which Lambda counts as a function error) is one MetricRefusals; a
// grant and a key-store failure are none, so the authorizer-errors alarm
// (Errors less refusals) pages on failures only.
func TestAuthorizerCountsRefusals(t *testing.T) {
	ctx := context.Background()
	keys := &revocableKeys{MemKeys: apikeys.NewMemKeys(), revoked: map[string]bool{}}
	k := apikeys.NewAPIKey()
	if err := keys.PutKey(ctx, k, "acme"); err != nil {
		t.Fatal(err)
	}
	m := &countMetrics{n: map[string]float64{}}
	h := &Handler{Keys: keys, Metrics: m}
	ask := func(v string) error {
		_, err := h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": v}})
		return err
	}
	for _, v := range []string{"", "Basic x", "Bearer nosuchkey"} {
		if err := ask(v); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("%q: %v", v, err)
		}
	}
	if err := ask("Bearer " + k); err != nil {
		t.Fatal(err)
	}
	keys.down = true
	if err := ask("Bearer " + k); err == nil || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("outage: %v", err)
	}
	if len(m.n) != 1 || m.n[MetricRefusals] != 3 {
		t.Fatalf("counts %v, want %s 3 and nothing else", m.n, MetricRefusals)
	}
}

// countingKeys is a CredentialStore that counts its lookups.
type countingKeys struct {
	*apikeys.MemKeys
	mu      sync.Mutex
	lookups int
}

func (k *countingKeys) Credential(ctx context.Context, hash string) (apikeys.Credential, bool, error) {
	k.mu.Lock()
	k.lookups++
	k.mu.Unlock()
	return k.MemKeys.Credential(ctx, hash)
}

// TestAuthorizerReadsExactlyTheDocumentedForm: the authorizer accepts
// "Bearer" (in any letter case), exactly one space, then the key, a key
// being 1..512 printable ASCII characters without whitespace
// (apikeys.KeyRule); only optional spaces and tabs around the whole value
// (HTTP's own) are dropped. Two spaces, a tab or any other whitespace
// after the scheme, a key with \v, \f, NBSP or another Unicode space
// around it, and a key holding NUL, DEL, a control character or non-ASCII
// (even one stored as such) are refused as Unauthorized (401), never
// granted and never an error API Gateway would answer 500; the key store
// is not asked about such a header.
func TestAuthorizerReadsExactlyTheDocumentedForm(t *testing.T) {
	ctx := context.Background()
	keys := &countingKeys{MemKeys: apikeys.NewMemKeys()}
	ka := apikeys.NewAPIKey()
	if err := keys.PutKey(ctx, ka, "acme"); err != nil {
		t.Fatal(err)
	}
	// Keys outside the rule, stored as an operator might have stored them
	// by hand: presented as they are, each is still refused.
	var odd []string
	for _, c := range []string{"\v", "\f", "\x00", "\x7f", "\x1b", "é", "\u00a0", "\u2003", "\ufeff"} {
		k := "idk_odd" + c + "key0123456789"
		if err := keys.PutKey(ctx, k, "acme"); err != nil {
			t.Fatal(err)
		}
		odd = append(odd, k)
	}
	h := &Handler{Keys: keys}
	ask := func(v string) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		return h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": v}})
	}
	for _, v := range []string{"Bearer " + ka, "bearer " + ka, "BEARER " + ka, " Bearer " + ka, "Bearer " + ka + " ", "\tBearer " + ka + "\t"} {
		if r, err := ask(v); err != nil || !r.IsAuthorized || r.Context[ContextTenantKey] != "acme" {
			t.Errorf("%q: %+v %v, want acme's grant", v, r, err)
		}
	}
	granted := keys.lookups
	bad := []string{
		"Bearer  " + ka, "Bearer   " + ka, "Bearer \t" + ka, "Bearer\t " + ka, "Bearer\v" + ka, "Bearer\u00a0" + ka,
		"Bearer " + ka + "\v", "Bearer " + ka + "\f", "Bearer " + ka + "\r", "Bearer " + ka + "\n", "Bearer " + ka + "\x00",
		"Bearer \v" + ka, "Bearer \f" + ka, "\vBearer " + ka, "\fBearer " + ka, "Bearer " + ka + "\u00a0", "Bearer " + ka + "\u0085",
		"Bearer \u2003" + ka, "\u00a0Bearer " + ka, "Bearer " + ka + " x", "Bearer " + strings.Repeat("k", apikeys.MaxKeyLen+1),
	}
	for _, k := range odd {
		bad = append(bad, "Bearer "+k)
	}
	for _, v := range bad {
		if r, err := ask(v); !errors.Is(err, ErrUnauthorized) || err.Error() != "Unauthorized" || r.IsAuthorized {
			t.Errorf("%q: %+v %v, want Unauthorized (401)", v, r, err)
		}
	}
	if n := keys.lookups - granted; n != 0 {
		t.Errorf("the key store was asked %d times about headers outside the form", n)
	}
}
