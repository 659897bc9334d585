package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/cmd/idemkit/internal/conform/conformtest"
)

// advertising serves the reference server of profile served, with a
// discovery document (GET /.well-known/openwop) that advertises policy as
// an idemkit host does (extensions["idemkit.idempotency"].policy); an empty
// policy advertises none, as an API that is not idemkit's.
func advertising(t *testing.T, served, policy string) *httptest.Server {
	t.Helper()
	ref := conformtest.New(served, conformtest.Breaks{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/openwop" {
			w.Header().Set("Content-Type", "application/json")
			ext := ""
			if policy != "" {
				ext = `,"extensions":{"idemkit.idempotency":{"policy":"` + policy + `"}}`
			}
			_, _ = w.Write([]byte(`{"protocolVersions":["2"]` + ext + `}`))
			return
		}
		ref.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A profile checked against an API that advertises another policy (the
// commerce profile against `make run`, which serves the OpenWOP policy)
// fails by design: conform says so on stderr, naming the policy the API
// serves and how to check the one asked for, so a user does not read the
// failures as the API breaking the policy. Before the fix the failures
// came with no word of it.
func TestConformSaysWhenTheAPIAdvertisesAnotherPolicy(t *testing.T) {
	srv := advertising(t, conformtest.OpenWOP, "openwop")
	code, out, errOut := conformAt(t, "--api-key", conformtest.APIKey1, "--profile", "commerce", srv.URL)
	if code != 1 || !strings.Contains(out, "FAIL ") {
		t.Fatalf("exit %d, want 1 with failures\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"advertises the openwop policy", "commerce", "idemkit dev --policy commerce", "--profile openwop"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
		t.Errorf("want one line on stderr, got:\n%s", errOut)
	}
}

// An API whose advertised policy is the profile's, or that advertises none
// (not an idemkit host), gets no such note.
func TestConformNoPolicyNoteWhenItMatches(t *testing.T) {
	for _, policy := range []string{"openwop", ""} {
		srv := advertising(t, conformtest.OpenWOP, policy)
		args := append([]string{"--api-key", conformtest.APIKey1, "--api-key", conformtest.APIKey2}, conformFastFlags...)
		code, out, errOut := conformAt(t, append(args, srv.URL)...)
		if code != 0 || errOut != "" {
			t.Fatalf("policy %q: exit %d, stderr %q, want 0 and nothing\nstdout:\n%s", policy, code, errOut, out)
		}
	}
}

// The commerce and ERP profiles check one tenant (their scope scenarios
// take --scope-key PART=KEY): a second --api-key given to them is not
// used, and conform says so on stderr, naming --scope-key, instead of
// silently skipping what the user may think the key enables (RED_TEAM 385).
// The openwop profile uses it (tenant-isolation) and says nothing.
func TestConformSaysASecondKeyIsUnused(t *testing.T) {
	for _, profile := range []string{conformtest.Commerce, conformtest.ERP} {
		srv := conformtest.HTTPTest(conformtest.New(profile, conformtest.Breaks{}))
		defer srv.Close()
		scope, _ := conformProfileFlags(profile)
		args := append([]string{"--profile", profile, "--api-key", conformtest.APIKey1, "--api-key", conformtest.APIKey2}, conformFastFlags...)
		code, out, errOut := conformAt(t, append(append(args, scope...), srv.URL)...)
		if code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", profile, code, out, errOut)
		}
		for _, want := range []string{"second --api-key", "not used", "--scope-key"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", profile, want, errOut)
			}
		}
		if strings.Contains(errOut, conformtest.APIKey2) {
			t.Errorf("%s: stderr shows the key itself:\n%s", profile, errOut)
		}
	}
}
