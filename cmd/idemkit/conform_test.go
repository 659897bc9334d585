package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/cmd/idemkit/internal/conform"
	"github.com/idemkit/idemkit/cmd/idemkit/internal/conform/conformtest"
)

// conformFastFlags are the flags that make the in-flight scenario quick against the
// reference server.
var conformFastFlags = []string{"--slow-body", `{"workflowId":"conformance-delay","inputs":{"delayMs":1000}}`, "--stagger", "150ms"}

func conformAt(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runConform(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func conformLastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// conformProfileFlags are the reference server's credentials for the
// profile's scope parts, as flags, and the profile's scenario count.
func conformProfileFlags(p string) ([]string, int) {
	switch p {
	case conformtest.Commerce:
		return []string{"--scope-key", "namespace=" + conformtest.APIKeyNamespace2, "--scope-key", "worker=" + conformtest.APIKeyWorker2,
			"--failed-run-body", `{"workflowId":"` + conformtest.FailsLaterWorkflow + `","inputs":{}}`}, len(conform.ScenariosFor(conform.ProfileCommerce))
	case conformtest.ERP:
		return []string{"--scope-key", "client=" + conformtest.APIKeyClient2, "--scope-key", "company=" + conformtest.APIKeyCompany2,
			"--scope-key", "organization=" + conformtest.APIKeyOrganization2}, len(conform.ScenariosFor(conform.ProfileERP))
	}
	return nil, 7
}

func TestConformPassesACorrectServer(t *testing.T) {
	for _, p := range []string{conformtest.OpenWOP, conformtest.Commerce, conformtest.ERP} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			srv := conformtest.HTTPTest(conformtest.New(p, conformtest.Breaks{}))
			defer srv.Close()
			scope, n := conformProfileFlags(p)
			// Flags on both sides of the URL.
			args := append([]string{"--api-key", conformtest.APIKey1, "--profile", p}, conformFastFlags...)
			args = append(append(args, srv.URL, "--api-key", conformtest.APIKey2), scope...)
			code, out, errOut := conformAt(t, args...)
			if want := fmt.Sprintf("%d passed, 0 failed", n); code != 0 || conformLastLine(out) != want {
				t.Fatalf("exit %d, want 0 and %q\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
			}
		})
	}
}

// Each policy's checker fails a server that breaks one rule of it, naming
// the rule.
func TestConformFailsABrokenServerPerProfile(t *testing.T) {
	for _, tc := range []struct {
		profile string
		b       conformtest.Breaks
		fail    string
	}{
		{conformtest.Commerce, conformtest.Breaks{SplitComma: true}, "key-comma"},
		{conformtest.Commerce, conformtest.Breaks{ScopeWithoutWorker: true}, "scope-worker"},
		{conformtest.ERP, conformtest.Breaks{TestRouteNeedsAuth: true}, "test-route"},
		{conformtest.ERP, conformtest.Breaks{ScopeWithoutOrganization: true}, "scope-organization"},
	} {
		t.Run(tc.profile+"/"+tc.fail, func(t *testing.T) {
			t.Parallel()
			srv := conformtest.HTTPTest(conformtest.New(tc.profile, tc.b))
			defer srv.Close()
			scope, n := conformProfileFlags(tc.profile)
			args := append([]string{"--api-key", conformtest.APIKey1, "--profile", tc.profile}, conformFastFlags...)
			code, out, _ := conformAt(t, append(append(args, scope...), srv.URL)...)
			if code != 1 || !strings.Contains(out, "\nFAIL "+tc.fail+": ") || conformLastLine(out) != fmt.Sprintf("%d passed, 1 failed", n-1) {
				t.Fatalf("exit %d\n%s", code, out)
			}
		})
	}
}

func TestConformFailsABrokenServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(conformtest.New(conformtest.OpenWOP, conformtest.Breaks{MismatchLeaks: true}))
	defer srv.Close()
	args := append([]string{"--api-key", conformtest.APIKey1}, conformFastFlags...)
	code, out, _ := conformAt(t, append(args, srv.URL)...)
	if code != 1 || !strings.Contains(out, "\nFAIL mismatch: ") || conformLastLine(out) != "5 passed, 1 failed" ||
		!strings.Contains(out, "SKIP tenant-isolation: ") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestConformUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"http://a", "http://b"},
		{"--api-key", "k", "--profile", "stripe", "http://a"},
		{"--api-key", "a", "--api-key", "b", "--api-key", "c", "http://a"},
		{"--api-key", "", "http://a"},
		{"--api-key", "k", "--route", "GET /runs", "http://a"},
		{"--api-key", "k", "--body", "[]", "http://a"},
		{"--api-key", "k", "--no-such-flag", "http://a"},
		{"--api-key", "k", "--timeout", "0s", "http://a"},
		{"--api-key", "k", "--scope-key", "worker", "http://a"},
		{"--api-key", "k", "--scope-key", "worker=", "http://a"},
		{"--api-key", "k", "--profile", "commerce", "--scope-key", "worker=a", "--scope-key", "worker=b", "http://a"},
		{"--api-key", "k", "--profile", "commerce", "--scope-key", "client=a", "http://a"},
		{"--api-key", "k", "--scope-key", "worker=a", "http://a"}, // openwop has no scope parts
		{"--api-key", "k", "--other-route", "POST /runs/cancel", "http://a"},
		{"--api-key", "k", "--test-route", "GET /test", "http://a"},
		{"--api-key", "k", "not a url"},
		{"http://a"}, // no --api-key
	} {
		if code, out, errOut := conformAt(t, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%q: exit %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
	// The usage line is the contract, verbatim.
	const usage = "usage: idemkit conform [--api-key KEY]... [--route 'POST /runs'] [--body JSON] [--profile openwop|commerce|erp] URL"
	if code, out, _ := conformAt(t, "-h"); code != 0 || strings.SplitN(out, "\n", 2)[0] != usage {
		t.Errorf("-h: exit %d %q", code, out)
	}
	// A usage error names the mistake and how to get the help, in two
	// lines: the help is too long to repeat.
	for _, args := range [][]string{{}, {"--no-such-flag", "http://a"}, {"--api-key", "k", "--profile", "bogus", "http://a"}} {
		if _, _, errOut := conformAt(t, args...); strings.Count(errOut, "\n") != 2 || !strings.HasSuffix(errOut, "\nrun 'idemkit conform -h' for help\n") {
			t.Errorf("%q: not the error and the hint: %q", args, errOut)
		}
	}
}

// --route and --body reach the requests: every POST the checker sends to the
// route carries the given body, a variant of it (mismatch), the slow body or
// the invalid one.
func TestConformRouteAndBodyFlags(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	ref := conformtest.New(conformtest.OpenWOP, conformtest.Breaks{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, r.Method+" "+r.URL.Path+" "+string(b))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		ref.ServeHTTP(w, r)
	}))
	defer srv.Close()
	body := `{"workflowId":"conformance-noop","inputs":{"order":"A-17"}}`
	args := append([]string{"--api-key", conformtest.APIKey1, "--api-key", conformtest.APIKey2,
		"--route", "POST /runs", "--body", body, "--profile", "openwop"}, conformFastFlags...)
	code, out, errOut := conformAt(t, append(args, srv.URL)...)
	if code != 0 || conformLastLine(out) != "7 passed, 0 failed" {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for _, b := range bodies {
		switch {
		case b == "POST /runs "+body:
			seen["body"]++
		case strings.HasPrefix(b, `POST /runs {"inputs":{"conformVariant":`) && strings.Contains(b, `"order":"A-17"`):
			seen["variant"]++
		case b == "POST /runs "+conformFastFlags[1]:
			seen["slow"]++
		case b == "POST /runs {}":
			seen["invalid"]++
		default:
			t.Errorf("unexpected request %q", b)
		}
	}
	if seen["body"] < 10 || seen["variant"] != 2 || seen["slow"] != 5 || seen["invalid"] != 2 {
		t.Fatalf("requests by kind %v", seen)
	}
}

// TestConformDurationsMustBePositive: --stagger 0 was accepted and then
// silently replaced by the 300 ms default (the config reads 0 as unset),
// so the in-flight scenarios did not run as asked; a --timeout or
// --stagger that is not positive is a usage error naming the flag. Failed
// before: --stagger 0 went on to run (exit 1, the API unreachable).
func TestConformDurationsMustBePositive(t *testing.T) {
	for _, c := range []struct{ flag, value string }{{"--stagger", "0s"}, {"--stagger", "-1s"}, {"--timeout", "0s"}, {"--timeout", "-5s"}} {
		code, out, errOut := conformAt(t, "--api-key", "k", c.flag, c.value, "http://127.0.0.1:1")
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "idemkit conform: "+c.flag+" "+c.value+": want a positive duration") {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want 2 naming the flag", c.flag, c.value, code, out, errOut)
		}
	}
}
