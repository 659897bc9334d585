package conform

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Profile selects the Layer-1 rule set checked.
type Profile string

const (
	// ProfileOpenWOP checks the OpenWOP default policy (the OpenWOP v2 core
	// spec's Layer-1 rules): key grammar
	// ^[A-Za-z0-9._~-]{22,128}$, replay marker OpenWOP-Idempotent-Replay:
	// true, registry error codes.
	ProfileOpenWOP Profile = "openwop"
	// ProfileSeed003 checks the ERP service's policy: key grammar 8..128 of
	// A-Z a-z 0-9 . _ : -, duplicate Idempotency-Key headers rejected,
	// Idempotency-Replayed: true|false, the key echoed, X-Request-ID and
	// Idempotency-Original-Request-ID, and 409 with Retry-After.
	ProfileSeed003 Profile = "seed003"
	// ProfileERP is another name for ProfileSeed003 (the ERP policy);
	// validation maps it to ProfileSeed003.
	ProfileERP Profile = "erp"
)

// Defaults of Config, fitting `idemkit dev`.
const (
	DefaultRoute   = "POST /runs"
	DefaultBody    = `{"workflowId":"conformance-noop","inputs":{}}`
	DefaultTimeout = 30 * time.Second
	DefaultStagger = 300 * time.Millisecond
)

// Default bodies derived from DefaultBody: the slow request of the in-flight
// scenario (the conformance-delay fixture) and an invalid request (no
// workflowId).
const (
	DefaultSlowBody    = `{"workflowId":"conformance-delay","inputs":{"delayMs":1500}}`
	DefaultInvalidBody = `{"inputs":{}}`
)

// Config configures a Run. Only BaseURL is required.
type Config struct {
	// BaseURL is the API's root, e.g. http://127.0.0.1:8787. Route paths are
	// appended to it.
	BaseURL string

	// APIKeys are sent as "Authorization: Bearer <key>". The first one is
	// used by every scenario; a second one (another tenant) enables
	// tenant-isolation. Default none (no Authorization header).
	APIKeys []string

	// Route is the mutating operation checked, "METHOD /path". Default
	// "POST /runs".
	Route string

	// Body is a valid request body for Route; it must be a JSON object.
	// Default {"workflowId":"conformance-noop","inputs":{}}. The mismatch
	// scenario derives a different body from it by adding a member to its
	// "inputs" object (or to the object itself when it has none).
	Body string

	// SlowBody is a valid request that takes long enough to overlap a
	// duplicate (in-flight scenario). Default: DefaultSlowBody when Body is
	// the default, else Body.
	SlowBody string

	// InvalidBody is a request the API rejects with 400 validation_error.
	// Default: DefaultInvalidBody when Body is the default, else {}.
	InvalidBody string

	// GetPath is the path of a GET of the resource a Route call creates, with
	// "{id}" standing for the "runId" (or "id") member of the created
	// response. Default: Route's path + "/{id}".
	GetPath string

	// Profile is the rule set checked. Default ProfileOpenWOP.
	Profile Profile

	// HTTP sends the requests; it must not retry or follow redirects.
	// Default: an http.Client with Timeout that does not follow redirects.
	HTTP *http.Client

	// Timeout bounds each request (it is the default client's Timeout, and
	// the bound on a duplicate's wait in the in-flight scenario). Default 30s.
	Timeout time.Duration

	// Stagger is how long the in-flight scenario lets the slow request run
	// before it sends the duplicates. Default 300ms.
	Stagger time.Duration
}

// ErrConfig is wrapped by configuration errors.
var ErrConfig = errors.New("conform: invalid config")

// resolved is a Config with defaults applied and parts parsed.
type resolved struct {
	Config
	method, path string
}

func (c Config) resolve() (*resolved, error) {
	if c.BaseURL == "" {
		return nil, fmt.Errorf("%w: no URL", ErrConfig)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: URL %q is not an http(s) URL", ErrConfig, c.BaseURL)
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Route == "" {
		c.Route = DefaultRoute
	}
	method, path, ok := strings.Cut(strings.TrimSpace(c.Route), " ")
	path = strings.TrimSpace(path)
	method = strings.ToUpper(method)
	if !ok || !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%w: route %q is not \"METHOD /path\"", ErrConfig, c.Route)
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodConnect:
		return nil, fmt.Errorf("%w: route %q is not a mutating method", ErrConfig, c.Route)
	}
	defaultBody := c.Body == ""
	if defaultBody {
		c.Body = DefaultBody
	}
	if c.SlowBody == "" {
		c.SlowBody = c.Body
		if defaultBody {
			c.SlowBody = DefaultSlowBody
		}
	}
	if c.InvalidBody == "" {
		c.InvalidBody = "{}"
		if defaultBody {
			c.InvalidBody = DefaultInvalidBody
		}
	}
	for name, b := range map[string]string{"body": c.Body, "slow body": c.SlowBody} {
		var obj map[string]any
		if err := json.Unmarshal([]byte(b), &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%w: the %s must be a JSON object", ErrConfig, name)
		}
	}
	if c.GetPath == "" {
		c.GetPath = strings.TrimRight(path, "/") + "/{id}"
	}
	if !strings.HasPrefix(c.GetPath, "/") || !strings.Contains(c.GetPath, "{id}") {
		return nil, fmt.Errorf("%w: GET path %q must start with / and contain {id}", ErrConfig, c.GetPath)
	}
	switch c.Profile {
	case "":
		c.Profile = ProfileOpenWOP
	case ProfileOpenWOP, ProfileSeed003:
	case ProfileERP:
		c.Profile = ProfileSeed003
	default:
		return nil, fmt.Errorf("%w: profile %q (want openwop or erp)", ErrConfig, c.Profile)
	}
	if len(c.APIKeys) > 2 {
		return nil, fmt.Errorf("%w: at most two API keys", ErrConfig)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Stagger <= 0 {
		c.Stagger = DefaultStagger
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Timeout: c.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // the checker judges the API's own answer
		}}
	}
	return &resolved{Config: c, method: method, path: path}, nil
}
