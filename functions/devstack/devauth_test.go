package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	idemkit "github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
)

// TestTemplateAuthorizer: dev's authorizer TTL default is the deployed HTTP
// API's, read from the embedded template.yaml (ReauthorizeEvery: 300), and
// dev resolves the identity source from the header the template names; a
// template without a readable default authorizer or ReauthorizeEvery is an
// error, never a silent default.
func TestTemplateAuthorizer(t *testing.T) {
	a, err := parseTemplateAuthorizer(idemkit.Template)
	if err != nil {
		t.Fatal(err)
	}
	if a.ReauthorizeEvery != 300*time.Second || len(a.Headers) != 1 || a.Headers[0] != "Authorization" {
		t.Fatalf("template authorizer %+v, want Headers [Authorization], ReauthorizeEvery 5m", a)
	}
	if d, err := DeployedReauthorizeEvery(); err != nil || d != a.ReauthorizeEvery {
		t.Fatalf("DeployedReauthorizeEvery = %s, %v", d, err)
	}
	h := map[string]string{strings.ToLower(a.Headers[0]): "Bearer x"}
	if got := identitySource(h); len(got) != 1 || got[0] != "Bearer x" {
		t.Fatalf("identitySource(%v) = %v: dev does not read the template's identity header", h, got)
	}

	api := func(identity string) string {
		return "Resources:\n  Api:\n    Type: AWS::Serverless::HttpApi\n    Properties:\n      Auth:\n        DefaultAuthorizer: A\n        Authorizers:\n          A:\n" + identity
	}
	for name, tpl := range map[string]string{
		"not yaml":          "Resources: [",
		"no resources":      "AWSTemplateFormatVersion: x\n",
		"no http api":       "Resources:\n  F:\n    Type: AWS::Serverless::Function\n",
		"no default":        "Resources:\n  Api:\n    Type: AWS::Serverless::HttpApi\n    Properties: {}\n",
		"no identity":       api("            FunctionArn: x\n"),
		"no reauthorize":    api("            Identity:\n              Headers: [Authorization]\n"),
		"reauthorize ref":   api("            Identity:\n              ReauthorizeEvery: !Ref Ttl\n"),
		"reauthorize range": api("            Identity:\n              ReauthorizeEvery: 3601\n"),
	} {
		if a, err := parseTemplateAuthorizer([]byte(tpl)); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, a)
		}
	}
	if a, err := parseTemplateAuthorizer([]byte(api("            Identity:\n              Headers: [X-Key]\n              ReauthorizeEvery: 0\n"))); err != nil || a.ReauthorizeEvery != 0 || a.Headers[0] != "X-Key" {
		t.Fatalf("ReauthorizeEvery 0: %+v %v", a, err)
	}
}

var _ apikeys.CredentialStore = (*countingKeys)(nil)

// countingKeys is a CredentialStore counting its reads, whose credentials
// and failure the test sets.
type countingKeys struct {
	mu    sync.Mutex
	creds map[string]apikeys.Credential // by key hash
	fail  error
	reads int
}

func (k *countingKeys) Tenant(ctx context.Context, hash string) (string, bool, error) {
	c, ok, err := k.Credential(ctx, hash)
	return c.Tenant, ok, err
}

func (k *countingKeys) Credential(_ context.Context, hash string) (apikeys.Credential, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads++
	if k.fail != nil {
		return apikeys.Credential{}, false, k.fail
	}
	c, ok := k.creds[hash]
	return c, ok, nil
}

func (k *countingKeys) PutKey(_ context.Context, key, tenant string) error {
	return k.PutCredential(context.Background(), key, apikeys.Credential{Tenant: tenant})
}

func (k *countingKeys) PutCredential(_ context.Context, key string, c apikeys.Credential) error {
	k.set(key, &c)
	return nil
}

func (k *countingKeys) set(key string, c *apikeys.Credential) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c == nil {
		delete(k.creds, apikeys.HashKey(key))
	} else {
		k.creds[apikeys.HashKey(key)] = *c
	}
}

func (k *countingKeys) readCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reads
}

// TestAuthCache: the gateway keeps the authorizer's decision per
// Authorization value for the TTL, as API Gateway does: a grant (with its
// context) and a refusal are answered again without a key-store read, and
// a key changed or removed meanwhile keeps its old decision until the TTL
// has passed; a key-store failure is never kept; a request without an
// Authorization header is never kept; TTL 0 keeps nothing; the raw key is
// not kept, only its hash; the cache is bounded.
func TestAuthCache(t *testing.T) {
	ctx := context.Background()
	const (
		key   = "idk_cache-S3CR3T-0123456789"
		other = "idk_cache-other-0123456789"
	)
	keys := &countingKeys{creds: map[string]apikeys.Credential{}}
	keys.set(key, &apikeys.Credential{Tenant: "acme", Attrs: map[string]string{"namespace": "shop"}})
	h := &authfn.Handler{Keys: keys, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	req := func(auth string) events.APIGatewayV2CustomAuthorizerV2Request {
		hs := map[string]string{"authorization": auth}
		return events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", Type: "REQUEST", Headers: hs, IdentitySource: identitySource(hs)}
	}
	now := time.Unix(1_700_000_000, 0)
	c := newAuthCache(time.Minute)
	c.now = func() time.Time { return now }
	// ask authorizes auth, wanting tenant ("" for a refusal) and the given
	// number of key-store reads.
	ask := func(what, auth, tenant string, reads int) events.APIGatewayV2CustomAuthorizerSimpleResponse {
		t.Helper()
		before := keys.readCount()
		res, err := c.authorize(ctx, h, req(auth))
		switch {
		case tenant == "" && !errors.Is(err, authfn.ErrUnauthorized):
			t.Fatalf("%s: %+v %v, want Unauthorized", what, res, err)
		case tenant != "" && (err != nil || !res.IsAuthorized || res.Context[authfn.ContextTenantKey] != tenant):
			t.Fatalf("%s: %+v %v, want tenant %s", what, res, err, tenant)
		}
		if n := keys.readCount() - before; n != reads {
			t.Fatalf("%s: %d key-store reads, want %d", what, n, reads)
		}
		return res
	}

	first := ask("first use", "Bearer "+key, "acme", 1)
	if first.Context["namespace"] != "shop" {
		t.Fatalf("context %v lacks the key's attribute", first.Context)
	}
	first.Context[authfn.ContextTenantKey] = "globex" // a caller's change is not the cache's
	if again := ask("cached grant", "Bearer "+key, "acme", 0); again.Context["namespace"] != "shop" {
		t.Fatalf("cached context %v", again.Context)
	}

	// Removed while cached: still granted for the TTL, as deployed.
	keys.set(key, nil)
	now = now.Add(time.Minute - time.Nanosecond)
	ask("removed, within the TTL", "Bearer "+key, "acme", 0)
	now = now.Add(time.Nanosecond)
	ask("removed, TTL over", "Bearer "+key, "", 1)

	// A refusal is kept too: the key created afterwards is refused until
	// the TTL has passed.
	ask("cached refusal", "Bearer "+key, "", 0)
	ask("unknown key", "Bearer "+other, "", 1)
	keys.set(other, &apikeys.Credential{Tenant: "globex"})
	ask("created, refusal within the TTL", "Bearer "+other, "", 0)
	now = now.Add(time.Minute)
	ask("created, TTL over", "Bearer "+other, "globex", 1)

	// A refusal without a read (malformed) is kept like any refusal.
	ask("malformed", "Basic "+other, "", 0)

	// A key-store failure is never kept: the next request asks again.
	keys.set(key, &apikeys.Credential{Tenant: "acme"})
	now = now.Add(time.Minute)
	keys.fail = errors.New("throttled")
	for i := 0; i < 2; i++ {
		before := keys.readCount()
		if _, err := c.authorize(ctx, h, req("Bearer "+key)); err == nil || errors.Is(err, authfn.ErrUnauthorized) {
			t.Fatalf("store failure: %v, want a failure that is not a refusal", err)
		}
		if keys.readCount()-before != 1 {
			t.Fatal("a key-store failure was answered from the cache")
		}
	}
	keys.fail = nil
	ask("after the failure", "Bearer "+key, "acme", 1)

	// No Authorization header: asked every time, nothing kept.
	n := len(c.m)
	if _, err := c.authorize(ctx, h, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{}}); !errors.Is(err, authfn.ErrUnauthorized) || len(c.m) != n {
		t.Fatalf("no header: %v, %d entries (was %d)", err, len(c.m), n)
	}

	// Only hashes of the header are kept, never the key.
	if dump := fmt.Sprintf("%+v %#v", c.m, c.m); strings.Contains(dump, "S3CR3T") || strings.Contains(dump, "cache-other") {
		t.Fatal("the cache keeps a raw API key")
	}

	// Bounded: past authCacheMax entries nothing unexpired is kept beyond
	// the bound.
	for i := 0; i <= authCacheMax; i++ {
		_, _ = c.authorize(ctx, h, req(fmt.Sprintf("Basic %d", i)))
		if len(c.m) > authCacheMax {
			t.Fatalf("%d entries, bound %d", len(c.m), authCacheMax)
		}
	}

	// TTL 0: no cache; every request reads the key store.
	if newAuthCache(0) != nil {
		t.Fatal("newAuthCache(0) keeps decisions")
	}
	c = nil
	ask("no cache", "Bearer "+key, "acme", 1)
	ask("no cache, again", "Bearer "+key, "acme", 1)
}
