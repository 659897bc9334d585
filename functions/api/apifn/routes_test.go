package apifn

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
)

// TestRoutesMatchTemplate: Routes and the api function's HttpApi events in
// template.yaml list the same (method, path) pairs, a route is public
// exactly when its event opts out of the default Lambda authorizer, and the
// catch-all $default route reaches the handler without the authorizer (so
// the handler's 404, 405 and 401 answer everything else).
func TestRoutesMatchTemplate(t *testing.T) {
	var tpl struct {
		Resources struct {
			HttpApi struct {
				Properties struct {
					Auth struct {
						DefaultAuthorizer string `yaml:"DefaultAuthorizer"`
					} `yaml:"Auth"`
				} `yaml:"Properties"`
			} `yaml:"HttpApi"`
			ApiFunction struct {
				Properties struct {
					Events map[string]struct {
						Type       string `yaml:"Type"`
						Properties struct {
							Method string `yaml:"Method"`
							Path   string `yaml:"Path"`
							Auth   struct {
								Authorizer string `yaml:"Authorizer"`
							} `yaml:"Auth"`
						} `yaml:"Properties"`
					} `yaml:"Events"`
				} `yaml:"Properties"`
			} `yaml:"ApiFunction"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &tpl); err != nil {
		t.Fatal(err)
	}
	if tpl.Resources.HttpApi.Properties.Auth.DefaultAuthorizer == "" {
		t.Fatal("HttpApi has no DefaultAuthorizer: non-public routes would be open")
	}
	type key struct{ method, path string }
	events := map[key]bool{} // value: public
	sawDefault := false
	for name, e := range tpl.Resources.ApiFunction.Properties.Events {
		if e.Type != "HttpApi" {
			continue
		}
		p := e.Properties
		public := p.Auth.Authorizer == "NONE"
		if p.Path == "$default" {
			sawDefault = true
			if p.Method != "ANY" || !public {
				t.Errorf("event %s: $default must be ANY without the authorizer, got %s (authorizer %q)", name, p.Method, p.Auth.Authorizer)
			}
			continue
		}
		events[key{p.Method, p.Path}] = public
	}
	if !sawDefault {
		t.Error("template.yaml has no $default route: unknown paths would not get the envelope")
	}
	// Routes of custom methods on one run (":fork", ":pause", ":resume")
	// share the one event of their gateway path.
	seen, listed := map[key]bool{}, map[key]bool{}
	for _, r := range Routes {
		if listed[key{r.Method, r.Pattern}] {
			t.Errorf("route %s %s listed twice", r.Method, r.Pattern)
		}
		listed[key{r.Method, r.Pattern}] = true
		k := key{r.Method, r.GatewayPath()}
		if seen[k] && r.Gateway == "" {
			t.Errorf("route %s %s shares its gateway path %s with another route, declared as it is", r.Method, r.Pattern, k.path)
		}
		seen[k] = true
		public, ok := events[k]
		switch {
		case !ok:
			t.Errorf("route %s %s (%s) has no HttpApi event in template.yaml", r.Method, r.Pattern, r.Op)
		case public != r.Public:
			t.Errorf("route %s %s: Public=%v in Routes, authorizer NONE=%v in template.yaml", r.Method, r.Pattern, r.Public, public)
		}
		if r.Public && r.Idempotent {
			t.Errorf("route %s %s: idempotent routes need the credential's tenant", r.Method, r.Pattern)
		}
		// A public route has no credential to scope a key by, so it is
		// never idempotent (the ERP policy's format-validation route
		// bypasses Layer 1 by definition); every other mutating route is.
		mutating := r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch || r.Method == http.MethodDelete
		if r.Idempotent != (mutating && !r.Public) {
			t.Errorf("route %s %s: Idempotent=%v, want it exactly on mutating methods of non-public routes", r.Method, r.Pattern, r.Idempotent)
		}
	}
	for k := range events {
		if !seen[k] {
			t.Errorf("template.yaml routes %s %s to the api function but Routes does not list it", k.method, k.path)
		}
	}
}

// TestRouteMatching: how raw paths reach routes (the handler's tests prove
// the answers end to end).
func TestRouteMatching(t *testing.T) {
	cases := []struct {
		method, path      string
		op, allow         string
		found, ok, authed bool
		runID             []string
	}{
		{"POST", "/runs", "createRun", "", true, true, true, nil},
		{"GET", "/runs", "", "POST", false, true, false, nil},
		{"GET", "/runs/acme~2Fr1", "getRun", "", true, true, true, []string{"acme~2Fr1"}},
		{"HEAD", "/runs/acme%2Fr1", "getRun", "", true, true, true, []string{"acme%2Fr1"}},
		{"GET", "/runs/acme/r1", "getRun", "", true, true, true, []string{"acme", "r1"}},
		{"GET", "/runs/acme/events", "streamRunEvents", "", true, true, true, []string{"acme"}},
		{"HEAD", "/runs/acme~2Fr1/effects", "getRunEffects", "", true, true, true, []string{"acme~2Fr1"}},
		{"POST", "/runs/acme/r1/cancel", "cancelRun", "", true, true, true, []string{"acme", "r1"}},
		{"GET", "/runs/acme~2Fr1/cancel", "", "POST", false, true, false, nil},
		{"POST", "/runs/acme~2Fr1:fork", "forkRun", "", true, true, true, []string{"acme~2Fr1"}},
		{"POST", "/runs/acme/r1:fork", "forkRun", "", true, true, true, []string{"acme", "r1"}},
		{"GET", "/runs/acme~2Fr1:fork", "", "POST", false, true, false, nil},
		{"POST", "/runs/acme~2Fr1:pause", "pauseRun", "", true, true, true, []string{"acme~2Fr1"}},
		{"POST", "/runs/acme/r1:pause", "pauseRun", "", true, true, true, []string{"acme", "r1"}},
		{"POST", "/runs/acme%2Fr1:resume", "resumeRun", "", true, true, true, []string{"acme%2Fr1"}},
		{"GET", "/runs/acme~2Fr1:pause", "", "POST", false, true, false, nil},
		{"GET", "/runs/acme~2Fr1:resume", "", "POST", false, true, false, nil},
		{"POST", "/runs/acme~2Fr1", "", "GET, HEAD", false, true, false, nil},
		{"DELETE", "/runs/acme~2Fr1", "", "GET, HEAD", false, true, false, nil},
		{"DELETE", "/runs/acme/r1", "", "GET, HEAD", false, true, false, nil},
		{"DELETE", "/runs/acme~2Fr1/effects", "", "GET, HEAD", false, true, false, nil},
		{"GET", "/.well-known/openwop", "getCapabilities", "", true, true, false, nil},
		{"HEAD", "/.well-known/openwop", "getCapabilities", "", true, true, false, nil},
		{"POST", "/.well-known/openwop", "", "GET, HEAD", false, true, false, nil},
		{"GET", "/openapi.json", "getOpenApiSpec", "", true, true, false, nil},
		{"HEAD", "/openapi.json", "getOpenApiSpec", "", true, true, false, nil},
		{"POST", "/openapi.json", "", "GET, HEAD", false, true, false, nil},
		{"GET", "/openapi.json/x", "", "", false, false, false, nil},
		{"GET", "/runs/", "", "", false, false, false, nil},
		{"GET", "/runs/a/b/c/d", "", "", false, false, false, nil},
		{"GET", "/nope", "", "", false, false, false, nil},
	}
	for _, c := range cases {
		m, allow, found, ok := MatchRoute(c.method, c.path)
		if found != c.found || ok != c.ok || m.Route.Op != c.op || allow != c.allow && !found {
			t.Errorf("%s %s: op %q allow %q found %v ok %v, want %q %q %v %v", c.method, c.path, m.Route.Op, allow, found, ok, c.op, c.allow, c.found, c.ok)
		}
		if got := Authorized(c.method, c.path); got != c.authed {
			t.Errorf("%s %s: Authorized %v, want %v", c.method, c.path, got, c.authed)
		}
		if c.runID != nil && !slices.Equal(m.Params["runId"], c.runID) {
			t.Errorf("%s %s: runId segments %q, want %q", c.method, c.path, m.Params["runId"], c.runID)
		}
	}
	if got := (Route{Method: "POST", Pattern: "/runs/{runId}/cancel"}).Scope(); got != "POST /runs/{runId}/cancel" {
		t.Errorf("cancel scope %q", got)
	}
	if got := Routes[0].Scope(); got != OpCreateRun {
		t.Errorf("createRun scope %q, want %q", got, OpCreateRun)
	}
}

// TestTemplatePathsAreHTTPAPIPaths: every HttpApi event path in
// template.yaml is one API Gateway's HTTP API accepts: each segment is a
// literal ([A-Za-z0-9._~:-]) or a whole-segment path variable ({name}, or
// a greedy {name+} as the last segment). A variable sharing its segment
// with a literal (the OpenWOP custom-method form "{runId}:fork") is refused
// by API Gateway at deployment ("one or more path parts appear to be
// invalid") although cfn-lint and the SAM translator pass it, so such a
// route is declared by its gateway path (Route.Gateway) and the handler
// matches the rest.
func TestTemplatePathsAreHTTPAPIPaths(t *testing.T) {
	var tpl struct {
		Resources map[string]struct {
			Properties struct {
				Events map[string]struct {
					Type       string `yaml:"Type"`
					Properties struct {
						Path string `yaml:"Path"`
					} `yaml:"Properties"`
				} `yaml:"Events"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &tpl); err != nil {
		t.Fatal(err)
	}
	literal := func(s string) bool {
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._~:-", c)) {
				return false
			}
		}
		return s != ""
	}
	checked := 0
	for fn, res := range tpl.Resources {
		for name, e := range res.Properties.Events {
			if e.Type != "HttpApi" || e.Properties.Path == "$default" {
				continue
			}
			checked++
			segs := strings.Split(strings.TrimPrefix(e.Properties.Path, "/"), "/")
			for i, s := range segs {
				v, isVar := strings.CutPrefix(s, "{")
				if isVar {
					v, isVar = strings.CutSuffix(v, "}")
					v = strings.TrimSuffix(v, "+")
					if !isVar || !literal(v) || strings.ContainsAny(v, "{}:") || (strings.HasSuffix(s, "+}") && i != len(segs)-1) {
						t.Errorf("%s event %s: path %s: segment %q is not a whole-segment path variable", fn, name, e.Properties.Path, s)
					}
					continue
				}
				if !literal(s) {
					t.Errorf("%s event %s: path %s: segment %q is neither a literal nor a whole-segment path variable", fn, name, e.Properties.Path, s)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no HttpApi event found in template.yaml")
	}
}

// TestReadmeRouteTableIsRoutes: the API table of functions/README.md (the
// reference host's routes, one row each; a `GET`/`HEAD /path` row names
// both methods) lists exactly the (method, path) pairs of Routes, so a
// reader of that page finds every route the host serves and no other.
func TestReadmeRouteTableIsRoutes(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, api, ok := strings.Cut(string(b), "\n## API\n")
	if !ok {
		t.Fatal("functions/README.md has no \"## API\" section")
	}
	api, _, _ = strings.Cut(api, "\n#")
	row := regexp.MustCompile("(?m)^\\| ((?:`[A-Z]+`/)*)`([A-Z]+) (/[^` ]*)` \\|")
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(api, -1) {
		methods := []string{m[2]}
		for _, extra := range regexp.MustCompile("`([A-Z]+)`/").FindAllStringSubmatch(m[1], -1) {
			methods = append(methods, extra[1])
		}
		for _, method := range methods {
			documented[method+" "+m[3]] = true
		}
	}
	served := map[string]bool{}
	for _, r := range Routes {
		served[r.Method+" "+r.Pattern] = true
		if !documented[r.Method+" "+r.Pattern] {
			t.Errorf("functions/README.md's API table has no row for %s %s (%s)", r.Method, r.Pattern, r.Op)
		}
	}
	for d := range documented {
		if !served[d] {
			t.Errorf("functions/README.md's API table lists %s, which Routes does not serve", d)
		}
	}
	if len(documented) < 10 {
		t.Fatalf("read %d routes from the table, want every row: %v", len(documented), documented)
	}
}

// A HEAD on a GET route answers like the GET without a body (openapi.json),
// so it must pass the authorizer as the GET does: each non-public GET route
// has a HEAD route of its own (and its event in template.yaml, which
// TestRoutesMatchTemplate requires). A HEAD matching no route would reach
// the handler through $default, unauthenticated, and a valid key get 401.
func TestHeadOnEveryGetRouteIsAuthorized(t *testing.T) {
	for _, r := range Routes {
		if r.Method != "GET" || r.Public {
			continue
		}
		p := strings.NewReplacer("{runId}", "tenant-a~2FabcdefghijklmnopQR", "{id}", "entry-1").Replace(r.Pattern)
		if !Authorized("GET", p) {
			t.Fatalf("GET %s does not pass the authorizer", p)
		}
		if !Authorized("HEAD", p) {
			t.Errorf("HEAD %s (%s) does not pass the authorizer: a valid key gets 401", p, r.Op)
		}
		if _, allow, found, _ := MatchRoute("DELETE", p); found || !strings.Contains(allow, "HEAD") {
			t.Errorf("DELETE %s: found %v, Allow %q; want a 405 whose Allow lists HEAD", p, found, allow)
		}
	}
}

// A tenant id may start with "anon:" (the tenantId grammar), and a ":" is a
// legal path character, so a runId of such a tenant may arrive with only
// its "/" encoded. That ":" is the tenant's, not a route suffix like
// ":fork": every run route, getRun included, matches it, while
// "<runId>:fork" stays the fork route.
func TestAnonTenantRunIDMatchesEveryRunRoute(t *testing.T) {
	const id = "anon:sess-1234%2F86S3ikTXzGELQGtKADWKWg"
	for _, c := range []struct{ method, path, op string }{
		{"GET", "/runs/" + id, "getRun"},
		{"HEAD", "/runs/" + id, "getRun"},
		{"GET", "/runs/" + id + "/events/poll", "pollRunEvents"},
		{"GET", "/runs/" + id + "/effects", "getRunEffects"},
		{"POST", "/runs/" + id + "/cancel", "cancelRun"},
		{"POST", "/runs/" + id + ":fork", "forkRun"},
		{"POST", "/runs/" + id + ":pause", "pauseRun"},
		{"POST", "/runs/" + id + ":resume", "resumeRun"},
		{"GET", "/runs/anon:sess-1234/86S3ikTXzGELQGtKADWKWg", "getRun"},
	} {
		m, _, found, ok := MatchRoute(c.method, c.path)
		if !ok || !found || m.Route.Op != c.op {
			t.Errorf("%s %s: op %q found %v ok %v, want %s", c.method, c.path, m.Route.Op, found, ok, c.op)
			continue
		}
		if !Authorized(c.method, c.path) {
			t.Errorf("%s %s: not authorized", c.method, c.path)
		}
	}
	if m, _, found, _ := MatchRoute("POST", "/runs/"+id); found && m.Route.Op == "forkRun" {
		t.Errorf("POST /runs/%s matched forkRun without :fork", id)
	}
}
