package conform

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/conform/conformtest"
)

type breaks = conformtest.Breaks

func newRefServer(p Profile, b breaks) *conformtest.Server { return conformtest.New(string(p), b) }

func digest(b []byte) string { return conformtest.Digest(b) }

func run(t *testing.T, p Profile, b breaks, keys ...string) []Result {
	t.Helper()
	srv := httptest.NewServer(newRefServer(p, b))
	t.Cleanup(srv.Close)
	if keys == nil {
		keys = []string{conformtest.APIKey1, conformtest.APIKey2}
	}
	res, err := Run(context.Background(), Config{
		BaseURL: srv.URL, APIKeys: keys, Profile: p,
		// The conformance-delay fixture of the reference server, slow enough to
		// overlap its duplicates on a loaded machine.
		SlowBody: `{"workflowId":"conformance-delay","inputs":{"delayMs":1000}}`,
		Stagger:  150 * time.Millisecond,
		Timeout:  20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func failed(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if r.Status == Fail {
			out = append(out, r.Scenario)
		}
	}
	return out
}

func dump(rs []Result) string {
	var b bytes.Buffer
	Write(&b, rs)
	return b.String()
}

func TestCorrectServerPassesEverything(t *testing.T) {
	for _, p := range []Profile{ProfileOpenWOP, ProfileSeed003} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			rs := run(t, p, breaks{})
			if len(rs) != len(Scenarios()) {
				t.Fatalf("%d results", len(rs))
			}
			for _, r := range rs {
				if r.Status != Pass {
					t.Fatalf("correct server:\n%s", dump(rs))
				}
			}
			t.Logf("\n%s", dump(rs))
		})
	}
}

// Each break must fail exactly the matching scenario(s), and pass the rest.
func TestBrokenServerFailsTheMatchingScenario(t *testing.T) {
	both := []Profile{ProfileOpenWOP, ProfileSeed003}
	cases := []struct {
		name     string
		b        breaks
		profiles []Profile
		want     []string
	}{
		{"no replay marker", breaks{NoReplayMarker: true}, both, []string{"replay-marker"}},
		{"mismatch leaks the cached body", breaks{MismatchLeaks: true}, both, []string{"mismatch"}},
		{"mismatch replays", breaks{MismatchReplays: true}, both, []string{"mismatch"}},
		{"in-flight runs twice", breaks{InFlightRunsTwice: true}, both, []string{"in-flight"}},
		{"in-flight without Retry-After", breaks{InFlightNoRetryAfter: true}, both, []string{"in-flight"}},
		{"in-flight Retry-After is the lease under a live owner", breaks{InFlightLeaseRetry: true}, both, []string{"in-flight"}},
		{"in-flight retry timing in details", breaks{InFlightRetryDetails: true}, []Profile{ProfileOpenWOP}, []string{"in-flight"}},
		{"GET honours the key", breaks{GetHonoursKey: true}, both, []string{"get-ignores-key"}},
		{"tenants share records", breaks{SharedTenants: true}, both, []string{"tenant-isolation"}},
		{"validation errors cached", breaks{CacheValidation: true}, both, []string{"validation-not-cached"}},
		{"bad keys accepted", breaks{AcceptBadKeys: true}, both, []string{"key-grammar"}},
		{"key not echoed", breaks{NoKeyEcho: true}, []Profile{ProfileSeed003}, []string{"replay-marker"}},
		{"valid keys rejected", breaks{RejectValidKeys: true}, both, []string{"key-grammar"}},
		{"duplicate key headers accepted", breaks{AcceptDuplicateKeys: true}, []Profile{ProfileSeed003}, []string{"key-grammar"}},
		{"replay re-runs the request", breaks{ReplayReruns: true}, both, []string{"replay-marker", "mismatch", "in-flight", "tenant-isolation"}},
		{"first execution marked as a replay", breaks{MarkFirstAsReplay: true}, both, []string{"replay-marker", "in-flight", "tenant-isolation", "validation-not-cached"}},
		{"replay keeps the first X-Request-ID", breaks{StaleRequestID: true}, []Profile{ProfileSeed003}, []string{"replay-marker"}},
		{"mismatch with another code", breaks{MismatchWrongCode: true}, both, []string{"mismatch"}},
		{"in-flight with another code", breaks{InFlightWrongCode: true}, both, []string{"in-flight"}},
		{"GET validates the key", breaks{GetValidatesKey: true}, both, []string{"get-ignores-key"}},
		{"validation errors not re-checked", breaks{AcceptInvalidBody: true}, both, []string{"validation-not-cached"}},
		{"waiting in flight (correct)", breaks{WaitInFlight: true}, both, nil},
		{"waiting in flight without replay marker", breaks{WaitInFlight: true, NoReplayMarker: true}, both, []string{"replay-marker", "in-flight"}},
	}
	for _, tc := range cases {
		for _, p := range tc.profiles {
			t.Run(tc.name+"/"+string(p), func(t *testing.T) {
				t.Parallel()
				rs := run(t, p, tc.b)
				if got := failed(rs); !slices.Equal(got, tc.want) {
					t.Fatalf("failed %v, want %v:\n%s", got, tc.want, dump(rs))
				}
				for _, r := range rs {
					if r.Status == Fail {
						t.Logf("%s %s: %s", r.Status, r.Scenario, r.Detail)
					}
				}
				for _, r := range rs {
					if r.Status == Skip {
						t.Fatalf("skipped %s:\n%s", r.Scenario, dump(rs))
					}
				}
			})
		}
	}
}

// A server of one profile checked against the other fails on the rules
// where they differ (grammar, marker), which shows the profile matters.
func TestProfileMismatchFails(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newRefServer(ProfileOpenWOP, breaks{}))
	defer srv.Close()
	rs, err := Run(context.Background(), Config{BaseURL: srv.URL, APIKeys: []string{conformtest.APIKey1}, Profile: ProfileSeed003,
		SlowBody: `{"workflowId":"conformance-delay","inputs":{"delayMs":1000}}`, Stagger: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got := failed(rs)
	if !slices.Contains(got, "key-grammar") || !slices.Contains(got, "replay-marker") {
		t.Fatalf("failed %v:\n%s", got, dump(rs))
	}
}

func TestOneAPIKeySkipsTenantIsolation(t *testing.T) {
	t.Parallel()
	rs := run(t, ProfileOpenWOP, breaks{SharedTenants: true}, conformtest.APIKey1)
	var b bytes.Buffer
	passed, nfailed := Write(&b, rs)
	out := b.String()
	if passed != len(Scenarios())-1 || nfailed != 0 {
		t.Fatalf("passed %d failed %d:\n%s", passed, nfailed, out)
	}
	if !strings.Contains(out, "SKIP tenant-isolation: needs two --api-key flags") {
		t.Fatalf("output:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(Scenarios())+1 || lines[len(lines)-1] != "6 passed, 0 failed" {
		t.Fatalf("output:\n%s", out)
	}
	for i, s := range Scenarios() {
		if !strings.Contains(lines[i], " "+s.Name+": ") {
			t.Fatalf("line %d %q, want scenario %s", i, lines[i], s.Name)
		}
	}
}

func TestUnreachableServerFailsEverything(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nil)
	url := srv.URL
	srv.Close()
	rs, err := Run(context.Background(), Config{BaseURL: url, APIKeys: []string{"a", "b"}, Timeout: 5 * time.Second, Stagger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := failed(rs); len(got) != len(Scenarios()) {
		t.Fatalf("failed %v:\n%s", got, dump(rs))
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{},
		{BaseURL: "ftp://x"},
		{BaseURL: "http://x", Route: "GET /runs"},
		{BaseURL: "http://x", Route: "POST"},
		{BaseURL: "http://x", Body: "[1]"},
		{BaseURL: "http://x", Body: "{"},
		{BaseURL: "http://x", Profile: "other"},
		{BaseURL: "http://x", GetPath: "/runs/x"},
		{BaseURL: "http://x", APIKeys: []string{"a", "b", "c"}},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v", c, err)
		}
	}
}

func TestVariantChangesTheBody(t *testing.T) {
	for _, b := range []string{DefaultBody, `{"a":1}`} {
		v := variant(b)
		if v == b || digest([]byte(v)) == digest([]byte(b)) {
			t.Fatalf("variant(%s) = %s", b, v)
		}
	}
	if !strings.Contains(variant(DefaultBody), `"inputs":{"conformVariant":`) {
		t.Fatal(variant(DefaultBody))
	}
}

// Write prints exactly one line per scenario, whatever a detail holds, and
// the closing count line.
func TestWriteOneLinePerScenario(t *testing.T) {
	var b bytes.Buffer
	p, f := Write(&b, []Result{
		{Scenario: "key-grammar", Status: Pass, Detail: "ok"},
		{Scenario: "mismatch", Status: Fail, Detail: "request failed: dial tcp:\nconnection refused\r\n"},
		{Scenario: "tenant-isolation", Status: Skip, Detail: "needs two --api-key flags (two tenants)"},
	})
	want := "PASS key-grammar: ok\nFAIL mismatch: request failed: dial tcp: connection refused\nSKIP tenant-isolation: needs two --api-key flags (two tenants)\n1 passed, 1 failed\n"
	if p != 1 || f != 1 || b.String() != want {
		t.Fatalf("passed %d failed %d:\n%q\nwant\n%q", p, f, b.String(), want)
	}
}

// The checker judges the API's own answers: it does not follow a redirect.
func TestDefaultClientDoesNotFollowRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/runs" {
			http.Redirect(w, r, "/elsewhere", http.StatusSeeOther)
			return
		}
		w.WriteHeader(201)
	}))
	defer srv.Close()
	rc, err := Config{BaseURL: srv.URL}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cfg: rc, rules: rulesFor(rc.Profile)}
	a, err := e.post(context.Background(), "", DefaultBody, 0)
	if err != nil || a.status != http.StatusSeeOther {
		t.Fatalf("answer %v, err %v: want the 303 itself", a, err)
	}
}
