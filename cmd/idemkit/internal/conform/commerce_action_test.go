package conform

import (
	"net/http"
	"strings"
	"testing"
)

// TestActionReadResolvesTheNamedAction: the GET of the Action a pending
// answer names is its statusUrl on the API's own origin (relative ones
// resolved against the base URL), else GetPath with its id; a statusUrl on
// another origin is never sent the API key (GetPath with the id instead,
// or an error without one); an answer naming neither names no Action.
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
		{"statusUrl on another origin, id", `{"runId":"r1","statusUrl":"https://elsewhere.example/runs/r1"}`, true, "", "/runs/r1", ""},
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
