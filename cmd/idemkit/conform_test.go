package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/internal/conform/conformtest"
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

func TestConformPassesACorrectServer(t *testing.T) {
	for _, p := range []string{conformtest.OpenWOP, conformtest.Seed003} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(conformtest.New(p, conformtest.Breaks{}))
			defer srv.Close()
			// Flags on both sides of the URL.
			args := append([]string{"--api-key", conformtest.APIKey1, "--profile", p}, conformFastFlags...)
			args = append(args, srv.URL, "--api-key", conformtest.APIKey2)
			code, out, errOut := conformAt(t, args...)
			if code != 0 || conformLastLine(out) != "7 passed, 0 failed" {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}

// --profile erp is another name for --profile seed003: it passes a server
// following the ERP policy and fails one following the OpenWOP default policy.
func TestConformProfileERPAlias(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server string
		code   int
	}{{conformtest.Seed003, 0}, {conformtest.OpenWOP, 1}} {
		srv := httptest.NewServer(conformtest.New(tc.server, conformtest.Breaks{}))
		args := append([]string{"--api-key", conformtest.APIKey1, "--api-key", conformtest.APIKey2, "--profile", "erp"}, conformFastFlags...)
		code, out, errOut := conformAt(t, append(args, srv.URL)...)
		srv.Close()
		if code != tc.code || (tc.code == 0 && conformLastLine(out) != "7 passed, 0 failed") ||
			(tc.code == 1 && !strings.Contains(out, "FAIL key-grammar: ")) {
			t.Errorf("server %s: exit %d\nstdout:\n%s\nstderr:\n%s", tc.server, code, out, errOut)
		}
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
		{"--api-key", "k", "not a url"},
		{"http://a"}, // no --api-key
	} {
		if code, out, errOut := conformAt(t, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%q: exit %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
	// The usage line is the contract, verbatim.
	const usage = "usage: idemkit conform [--api-key KEY]... [--route 'POST /runs'] [--body JSON] [--profile openwop|erp] URL"
	if code, out, _ := conformAt(t, "-h"); code != 0 || strings.SplitN(out, "\n", 2)[0] != usage {
		t.Errorf("-h: exit %d %q", code, out)
	}
	for _, args := range [][]string{{}, {"--no-such-flag", "http://a"}} {
		if _, _, errOut := conformAt(t, args...); !strings.Contains(errOut, usage+"\n") {
			t.Errorf("%q: usage not shown: %q", args, errOut)
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
