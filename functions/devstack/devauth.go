package devstack

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"gopkg.in/yaml.v3"

	idemkit "github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
)

// templateAuthorizer is the HTTP API's default authorizer as template.yaml
// declares it: its identity source headers and how long API Gateway keeps
// its decisions (ReauthorizeEvery, seconds).
type templateAuthorizer struct {
	Headers          []string
	ReauthorizeEvery time.Duration
}

// parseTemplateAuthorizer reads the default authorizer of the template's
// AWS::Serverless::HttpApi (Auth.DefaultAuthorizer, Auth.Authorizers.NAME.
// Identity). ReauthorizeEvery must be a literal number of seconds.
func parseTemplateAuthorizer(template []byte) (templateAuthorizer, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return templateAuthorizer{}, fmt.Errorf("template: %w", err)
	}
	if len(doc.Content) != 1 {
		return templateAuthorizer{}, errors.New("template: empty document")
	}
	resources := yamlField(doc.Content[0], "Resources")
	if resources == nil || resources.Kind != yaml.MappingNode {
		return templateAuthorizer{}, errors.New("template: no Resources")
	}
	var api *yaml.Node
	for i := 0; i+1 < len(resources.Content); i += 2 {
		r := resources.Content[i+1]
		if t := yamlField(r, "Type"); t != nil && t.Value == "AWS::Serverless::HttpApi" {
			if api != nil {
				return templateAuthorizer{}, errors.New("template: more than one AWS::Serverless::HttpApi")
			}
			api = r
		}
	}
	if api == nil {
		return templateAuthorizer{}, errors.New("template: no AWS::Serverless::HttpApi")
	}
	auth := yamlField(yamlField(api, "Properties"), "Auth")
	name := yamlField(auth, "DefaultAuthorizer")
	if name == nil || name.Kind != yaml.ScalarNode {
		return templateAuthorizer{}, errors.New("template: the HTTP API has no DefaultAuthorizer")
	}
	id := yamlField(yamlField(yamlField(auth, "Authorizers"), name.Value), "Identity")
	if id == nil {
		return templateAuthorizer{}, fmt.Errorf("template: authorizer %s has no Identity", name.Value)
	}
	var a templateAuthorizer
	if h := yamlField(id, "Headers"); h != nil {
		for _, v := range h.Content {
			a.Headers = append(a.Headers, v.Value)
		}
	}
	every := yamlField(id, "ReauthorizeEvery")
	if every == nil {
		return templateAuthorizer{}, fmt.Errorf("template: authorizer %s has no Identity.ReauthorizeEvery", name.Value)
	}
	s, err := strconv.Atoi(every.Value)
	if err != nil || s < 0 || s > 3600 {
		return templateAuthorizer{}, fmt.Errorf("template: authorizer %s: ReauthorizeEvery %q is not 0..3600 seconds", name.Value, every.Value)
	}
	a.ReauthorizeEvery = time.Duration(s) * time.Second
	return a, nil
}

// yamlField returns the value of key in mapping n (nil when n is not a
// mapping or has no such key).
func yamlField(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// DeployedReauthorizeEvery is how long the deployed HTTP API keeps an
// authorizer decision: template.yaml's ReauthorizeEvery, the default of
// `idemkit dev --authorizer-ttl`.
func DeployedReauthorizeEvery() (time.Duration, error) {
	a, err := parseTemplateAuthorizer(idemkit.Template)
	return a.ReauthorizeEvery, err
}

// authCacheMax bounds the decisions an authCache holds: past it, expired
// decisions are dropped, and if none has expired, all of them.
const authCacheMax = 4096

// authCache keeps the authorizer's decisions as API Gateway's HTTP API does
// for a Lambda authorizer with simple responses and ReauthorizeEvery > 0:
// per value of the identity source (the Authorization header), for ttl from
// the authorizer's answer. A grant is kept with its context; a refusal
// (authfn.ErrUnauthorized, or isAuthorized false) is kept too, so an
// unknown key is refused again without a key-store read. Any other error
// (the key store failed) is never kept: the next request asks again.
//
// Consequence, as deployed: a key changed or removed in the api-keys table
// keeps its old decision for up to ttl. Entries are keyed by the SHA-256 of
// the header value; the value itself is neither kept nor logged.
type authCache struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[[sha256.Size]byte]authEntry
}

type authEntry struct {
	res     events.APIGatewayV2CustomAuthorizerSimpleResponse
	denied  bool // authfn.ErrUnauthorized
	expires time.Time
}

// newAuthCache returns a cache keeping decisions for ttl; nil (no cache:
// every request asks the authorizer) when ttl <= 0.
func newAuthCache(ttl time.Duration) *authCache {
	if ttl <= 0 {
		return nil
	}
	return &authCache{ttl: ttl, now: time.Now, m: map[[sha256.Size]byte]authEntry{}}
}

// authorize answers req from the cache, or asks h and keeps its decision.
// A request without exactly one identity source value always asks h (API
// Gateway refuses it without calling the authorizer; the authorizer refuses
// it without a key-store read).
func (c *authCache) authorize(ctx context.Context, h *authfn.Handler, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	if c == nil || len(req.IdentitySource) != 1 {
		return h.Handle(ctx, req)
	}
	k := sha256.Sum256([]byte(req.IdentitySource[0]))
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		if e.denied {
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, authfn.ErrUnauthorized
		}
		res := e.res
		res.Context = maps.Clone(e.res.Context)
		return res, nil
	}
	res, err := h.Handle(ctx, req)
	denied := errors.Is(err, authfn.ErrUnauthorized)
	if err != nil && !denied {
		return res, err
	}
	e = authEntry{res: res, denied: denied, expires: now.Add(c.ttl)}
	e.res.Context = maps.Clone(res.Context)
	c.mu.Lock()
	if len(c.m) >= authCacheMax {
		for k, old := range c.m {
			if !now.Before(old.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= authCacheMax {
			clear(c.m)
		}
	}
	c.m[k] = e
	c.mu.Unlock()
	return res, err
}
