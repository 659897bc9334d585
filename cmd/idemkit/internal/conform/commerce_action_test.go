package conform

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestActionReadResolvesTheNamedAction: the GET of the Action a pending
// answer names is its statusUrl on the API's own origin (relative ones
// resolved against the base URL), else GetPath with its id; a statusUrl on
// another origin (host, scheme or port) is an error, with or without an id
// beside it, and is never sent the API key; an answer naming neither names
// no Action.
func TestActionReadResolvesTheNamedAction(t *testing.T) {
	rc, err := Config{BaseURL: "http://127.0.0.1:8787", Profile: ProfileCommerce}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cfg: rc, rules: rulesFor(rc.Profile)}
	for _, tc := range []struct {
		name, body string
		named      bool
		url, path  string // the absolute URL read, or the path under the base URL
		err        string
	}{
		{"absolute statusUrl", `{"runId":"r1","statusUrl":"http://127.0.0.1:8787/runs/r1"}`, true, "http://127.0.0.1:8787/runs/r1", "", ""},
		{"relative statusUrl", `{"runId":"r1","statusUrl":"/runs/r1"}`, true, "http://127.0.0.1:8787/runs/r1", "", ""},
		{"statusUrl without id", `{"status":"pending","statusUrl":"/runs/r2"}`, true, "http://127.0.0.1:8787/runs/r2", "", ""},
		{"id only", `{"runId":"r/1","status":"pending"}`, true, "", "/runs/r%2F1", ""},
		{"statusUrl on another origin, id", `{"runId":"r1","statusUrl":"https://elsewhere.example/runs/r1"}`, true, "", "", "not on the API's origin"},
		{"statusUrl on another scheme, id", `{"runId":"r1","statusUrl":"https://127.0.0.1:8787/runs/r1"}`, true, "", "", "not on the API's origin"},
		{"statusUrl on another port, id", `{"runId":"r1","statusUrl":"http://127.0.0.1:8788/runs/r1"}`, true, "", "", "not on the API's origin"},
		{"statusUrl on another origin, no id", `{"statusUrl":"https://elsewhere.example/runs/r1"}`, true, "", "", "not on the API's origin"},
		{"nothing named", `{"status":"pending","requestId":"req-1"}`, false, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, named, err := e.actionRead([]byte(tc.body))
			switch {
			case named != tc.named:
				t.Fatalf("named %v, want %v", named, tc.named)
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case !named:
			case c.method != http.MethodGet || c.url != tc.url || tc.url == "" && c.path != tc.path:
				t.Fatalf("read %s %q (url %q), want GET %q (url %q)", c.method, c.path, c.url, tc.path, tc.url)
			}
		})
	}
}

// TestSameOriginTakesTheDefaultPort: a status link spelling the scheme's
// default port, or the host in another case, is on the API's origin; a
// downgraded scheme is not.
func TestSameOriginTakesTheDefaultPort(t *testing.T) {
	for _, tc := range []struct {
		u, base string
		same    bool
	}{
		{"https://API.example.com:443/runs/r1", "https://api.example.com", true},
		{"http://api.example.com/runs/r1", "http://api.example.com:80/v1", true},
		{"http://api.example.com/runs/r1", "https://api.example.com", false},
		{"https://api.example.com:8443/runs/r1", "https://api.example.com", false},
	} {
		u, err1 := url.Parse(tc.u)
		base, err2 := url.Parse(tc.base)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := sameOrigin(u, base); got != tc.same {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", tc.u, tc.base, got, tc.same)
		}
	}
}
