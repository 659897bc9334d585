package conform

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
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
	// ProfileERP checks the ERP service's policy: key grammar 8..128 of
	// A-Z a-z 0-9 . _ : -, duplicate Idempotency-Key headers rejected,
	// Idempotency-Replayed: true|false, the key echoed, X-Request-ID and
	// Idempotency-Original-Request-ID, and 409 with Retry-After.
	ProfileERP Profile = "erp"
	// ProfileCommerce checks the commerce policy: a key is any string of up
	// to 255 characters (non-ASCII allowed, a comma never splits it), scoped
	// by the credential's namespace and calling worker; it binds the
	// operation and an input fingerprint (409 idempotency-mismatch); replays
	// carry Idempotent-Replayed: true; a failed action, 5xx included, is
	// stored and replayed as failed; a request rejected at the door (400,
	// 401) records nothing.
	ProfileCommerce Profile = "commerce"
)

// Profiles lists the rule sets the checker has, the default first: each is
// named after the idem preset policy it checks (idem.PolicyNames). The
// --profile help and the unknown-profile error derive from this list.
var Profiles = []Profile{ProfileOpenWOP, ProfileCommerce, ProfileERP}

// ProfileList renders Profiles joined by sep ("openwop|commerce|erp").
func ProfileList(sep string) string {
	names := make([]string, len(Profiles))
	for i, p := range Profiles {
		names[i] = string(p)
	}
	return strings.Join(names, sep)
}

// scopeParts lists the scope parts of a profile's credential that
// Config.ScopeKeys may name.
func scopeParts(p Profile) []string {
	switch p {
	case ProfileCommerce:
		return []string{ScopeNamespace, ScopeWorker}
	case ProfileERP:
		return []string{ScopeClient, ScopeCompany, ScopeOrganization}
	}
	return nil
}

// Scope parts a ScopeKeys credential may differ in (see Config.ScopeKeys).
const (
	ScopeNamespace    = "namespace"    // commerce
	ScopeWorker       = "worker"       // commerce
	ScopeClient       = "client"       // ERP
	ScopeCompany      = "company"      // ERP
	ScopeOrganization = "organization" // ERP; "organisation" is accepted too
)

// DefaultModeHeader is the commerce policy's wait-mode request header.
const DefaultModeHeader = "Idempotency-Mode"

// DefaultTestRoute is the ERP policy's public format-validation route.
const DefaultTestRoute = "POST /api/v1/inbound/work-orders/test"

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
	// DefaultFailBody is a valid request whose action fails with a 5xx (the
	// conformance-unavailable fixture's 503).
	DefaultFailBody = `{"workflowId":"conformance-unavailable","inputs":{}}`
)

// Config configures a Run. Only BaseURL is required.
type Config struct {
	// BaseURL is the API's root, e.g. http://127.0.0.1:8787. Route paths are
	// appended to it.
	BaseURL string

	// APIKeys are sent as "Authorization: Bearer <key>". The first one is
	// used by every scenario; a second one (another tenant) enables
	// tenant-isolation, and the first one again is an ErrConfig. Default
	// none (no Authorization header).
	APIKeys []string

	// Route is the mutating operation checked, "METHOD /path". Default
	// "POST /runs".
	Route string

	// Body is a valid request body for Route; it must be a JSON object.
	// Default {"workflowId":"conformance-noop","inputs":{}}. The mismatch
	// scenario derives a different body from it by adding a member to its
	// "inputs" object (or to the object itself when it has none: an API
	// whose body is closed, as idemkit's createRun, refuses that member
	// with 400 validation_error before it compares the key, so give such
	// an API a body with an "inputs" object).
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

	// ScopeKeys holds, by scope part (ScopeNamespace, ScopeWorker under the
	// commerce policy; ScopeClient, ScopeCompany, ScopeOrganization under
	// the ERP policy), an API key whose credential differs from the first of
	// APIKeys in that part only. Each enables the scope-<part> scenario
	// (the same key under that credential names another record); the first
	// API key itself is an ErrConfig. Default none.
	ScopeKeys map[string]string

	// OtherRoute is a second mutating route on the resource a Route call
	// creates, "METHOD /path" with "{id}" standing for its id (commerce:
	// the same key there is 409 idempotency-mismatch; ERP: it is another
	// record, the scope including method and route). Default
	// "POST " + Route's path + "/{id}/cancel".
	OtherRoute string

	// FailBody is a valid request for Route whose action fails with a 5xx
	// (commerce: stored and replayed as failed; ERP: failed_retryable, never
	// replayed). Default: DefaultFailBody when Body is the default; else
	// the failure scenarios are skipped.
	FailBody string

	// FailedRunBody is a valid request for Route whose Action is created
	// and then fails (the commerce policy: a replay is that Action failed,
	// and RetryRoute starts a new one linked by on). Default none: the
	// retry-on-link scenario is skipped (idemkit dev: a webhook run to a
	// receiver that refuses it, with --allow-loopback-webhooks).
	FailedRunBody string

	// RetryRoute is the commerce policy's Action.retry, "METHOD /path" with
	// "{id}" standing for the failed Action's id. Default "POST " + Route's
	// path + "/{id}/retry".
	RetryRoute string

	// TestRoute is the ERP policy's public format-validation route,
	// "METHOD /path": no credential, no key needed, no record. Default
	// DefaultTestRoute.
	TestRoute string

	// TestBody is the body sent to TestRoute. Default Body.
	TestBody string

	// WorkOrderRoute is the ERP policy's live work-order route, "METHOD
	// /path", to which the live-route and xml-replay scenarios send work
	// orders ({"work_order_number", "projects": [{"code", "name",
	// "quantity"}]}) in JSON and in XML under a key. Default
	// DefaultWorkOrderRoute.
	WorkOrderRoute string

	// ModeHeader is the request header by which a caller of the commerce
	// policy says how a duplicate of a pending request waits ("sync" or
	// "async"). Default DefaultModeHeader.
	ModeHeader string

	// Notes, when set, receives a line Run writes that is no scenario's
	// verdict: the API advertises (GET /.well-known/openwop,
	// extensions["idemkit.idempotency"].policy) another policy than the
	// profile's, whose scenarios then fail there by design. Default none.
	Notes io.Writer

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
	method, path           string
	otherMethod, otherPath string // OtherRoute
	testMethod, testPath   string // TestRoute
	workOrderMethod        string // WorkOrderRoute
	workOrderPath          string
	retryMethod, retryPath string // RetryRoute
}

// splitRoute parses "METHOD /path" (a mutating method).
func splitRoute(name, route string) (method, path string, err error) {
	method, path, ok := strings.Cut(strings.TrimSpace(route), " ")
	path = strings.TrimSpace(path)
	method = strings.ToUpper(method)
	if !ok || !strings.HasPrefix(path, "/") {
		return "", "", fmt.Errorf("%w: %s %q is not \"METHOD /path\"", ErrConfig, name, route)
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodConnect:
		return "", "", fmt.Errorf("%w: %s %q is not a mutating method", ErrConfig, name, route)
	}
	return method, path, nil
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
	method, path, err := splitRoute("route", c.Route)
	if err != nil {
		return nil, err
	}
	if c.OtherRoute == "" {
		c.OtherRoute = "POST " + strings.TrimRight(path, "/") + "/{id}/cancel"
	}
	otherMethod, otherPath, err := splitRoute("other route", c.OtherRoute)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(otherPath, "{id}") {
		return nil, fmt.Errorf("%w: other route %q must contain {id}", ErrConfig, c.OtherRoute)
	}
	if c.TestRoute == "" {
		c.TestRoute = DefaultTestRoute
	}
	testMethod, testPath, err := splitRoute("test route", c.TestRoute)
	if err != nil {
		return nil, err
	}
	if c.RetryRoute == "" {
		c.RetryRoute = "POST " + strings.TrimRight(path, "/") + "/{id}/retry"
	}
	retryMethod, retryPath, err := splitRoute("retry route", c.RetryRoute)
	if err != nil {
		return nil, err
	}
	if c.WorkOrderRoute == "" {
		c.WorkOrderRoute = DefaultWorkOrderRoute
	}
	woMethod, woPath, err := splitRoute("work-order route", c.WorkOrderRoute)
	if err != nil {
		return nil, err
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
	if c.FailBody == "" && defaultBody {
		c.FailBody = DefaultFailBody
	}
	if c.TestBody == "" {
		c.TestBody = c.Body
	}
	if c.ModeHeader == "" {
		c.ModeHeader = DefaultModeHeader
	}
	// The body first: the slow body defaults to it, and a refusal names
	// the flag the operator gave (RED_TEAM 416).
	for _, b := range []struct{ name, v string }{{"body", c.Body}, {"slow body", c.SlowBody}} {
		var obj map[string]any
		if err := json.Unmarshal([]byte(b.v), &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%w: the %s must be a JSON object", ErrConfig, b.name)
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
	default:
		if !slices.Contains(Profiles, c.Profile) {
			return nil, fmt.Errorf("%w: profile %q (want one of %s)", ErrConfig, c.Profile, ProfileList(", "))
		}
	}
	if k, ok := c.ScopeKeys["organisation"]; ok { // the British spelling names the same part
		norm := maps.Clone(c.ScopeKeys)
		delete(norm, "organisation")
		if _, dup := norm[ScopeOrganization]; dup {
			return nil, fmt.Errorf("%w: scope part organization given twice", ErrConfig)
		}
		norm[ScopeOrganization] = k
		c.ScopeKeys = norm
	}
	for part, k := range c.ScopeKeys {
		if parts := scopeParts(c.Profile); len(parts) == 0 {
			var with []string
			for _, p := range Profiles {
				if len(scopeParts(p)) > 0 {
					with = append(with, string(p))
				}
			}
			return nil, fmt.Errorf("%w: scope part %q (profile %s has no scope parts: --scope-key is for --profile %s)", ErrConfig, part, c.Profile, strings.Join(with, " or "))
		} else if !slices.Contains(parts, part) {
			return nil, fmt.Errorf("%w: scope part %q (profile %s has %s)", ErrConfig, part, c.Profile, strings.Join(parts, ", "))
		}
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%w: empty API key for scope part %q", ErrConfig, part)
		}
		// The scenario asks whether another credential names another
		// record: the first key's own credential never does, and its FAIL
		// would blame the API for the caller's mistake.
		if len(c.APIKeys) > 0 && k == c.APIKeys[0] {
			return nil, fmt.Errorf("%w: the scope key of part %q is the first API key (want a key whose credential differs from it in %s only)", ErrConfig, part, part)
		}
	}
	if len(c.APIKeys) > 2 {
		return nil, fmt.Errorf("%w: at most two API keys", ErrConfig)
	}
	if len(c.APIKeys) == 2 && c.APIKeys[0] == c.APIKeys[1] {
		// tenant-isolation would find the one tenant's record under both
		// and fail the API for the caller's mistake.
		return nil, fmt.Errorf("%w: the second API key is the first one (tenant-isolation needs another tenant's key)", ErrConfig)
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
	return &resolved{Config: c, method: method, path: path,
		otherMethod: otherMethod, otherPath: otherPath, testMethod: testMethod, testPath: testPath,
		workOrderMethod: woMethod, workOrderPath: woPath, retryMethod: retryMethod, retryPath: retryPath}, nil
}
