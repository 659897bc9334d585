package webhook

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"net/netip"
	"testing"
	"time"
)

func TestWebhookPolicy(t *testing.T) {
	var p WebhookPolicy
	for _, ok := range []string{"https://example.com/x", "http://203.0.113.9:8080/"} {
		if err := p.CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"ftp://example.com", "http://user:pw@example.com", "http://127.0.0.1/", "http://[::1]/", "http://localhost:1/",
		"http://10.1.2.3/", "http://169.254.169.254/", "http://0.0.0.0/", "http://[fe80::1]/", "mailto:x@example.com", "http:///x", "http://[::ffff:127.0.0.1]/"} {
		if err := p.CheckURL(bad); !errors.Is(err, ErrDestinationRefused) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	lp := WebhookPolicy{AllowLoopback: true}
	if lp.CheckURL("http://127.0.0.1:9/") != nil || lp.CheckURL("http://localhost/") != nil || lp.CheckURL("http://10.0.0.1/") == nil {
		t.Fatal("AllowLoopback")
	}
	al := WebhookPolicy{Allow: []string{"hooks.example.com", "*.example.org"}}
	if al.CheckURL("https://hooks.example.com/") != nil || al.CheckURL("https://a.b.example.org/") != nil ||
		al.CheckURL("https://example.org/") == nil || al.CheckURL("https://evil.com/") == nil {
		t.Fatal("allowlist")
	}
	if err := p.CheckIP(netip.MustParseAddr("192.168.1.1")); err == nil {
		t.Fatal("private IP admitted")
	}
}

func TestParseCreate(t *testing.T) {
	p := &WebhookPolicy{}
	r, e := ParseCreate([]byte(`{"workflowId":"conformance-delay","inputs":{"delayMs":250}}`), p)
	if e != nil || r.DelayMs != 250 || r.WorkflowID != WorkflowDelay {
		t.Fatal(r, e)
	}
	r, e = ParseCreate([]byte(`{"workflowId":"webhook","inputs":{"url":"https://example.com/h","payload":{"a":[1,2]}}}`), p)
	if e != nil || r.URL != "https://example.com/h" || string(r.Payload) != `{"a":[1,2]}` {
		t.Fatal(r, e)
	}
	u, pl, err := webhookInputs(r.Inputs)
	if err != nil || u != r.URL || string(pl) != string(r.Payload) {
		t.Fatal(u, string(pl), err)
	}
	for _, b := range []string{``, `null`, `{}`, `{"workflowId":1}`, `{"workflowId":"webhook","inputs":{"url":5}}`,
		`{"workflowId":"conformance-delay","inputs":{"delayMs":1.5}}`, `{"workflowId":"conformance-delay","inputs":{"delayMs":-1}}`, `{"a":1} {}`,
		`{"workflowId":"conformance-delay","inputs":{"delayMs":"5"}}`, `{"workflowId":"conformance-delay","inputs":{"delayMs":10001}}`,
		`{"workflowId":"conformance-delay","inputs":{"delayMs":1e9}}`, `{"workflowId":"conformance-delay","inputs":{"delayMs":null}}`} {
		if _, e := ParseCreate([]byte(b), p); e == nil || e.Status != 400 {
			t.Errorf("%q: %v", b, e)
		}
	}
}

// TestWebhookIdentityUnderTheRunsStamp: the webhook effect's identity is
// derived under the run's OWN stamp: a run stamped with another recipe (a v1
// history) gets ErrUnsupportedRecipe, never a v2 identity computed in its
// place.
func TestWebhookIdentityUnderTheRunsStamp(t *testing.T) {
	ctx := context.Background()
	r := runs.NewRun("acme", WorkflowWebhook, []byte(`{"url":"https://example.com/"}`), time.Now())
	m := runs.NewMemRuns()
	if err := m.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Get(ctx, r.ID)
	id, err := WebhookIdentity(got)
	want, _ := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: r.ID, NodeID: NodeDeliver, Ordinal: 0, Provider: webhookProvider})
	if err != nil || id != want || id.Recipe != identity.ActivityRecipe {
		t.Fatalf("%+v %v, want %+v", id, err, want)
	}
	for _, stamp := range []string{"openwop-activity-v1", ""} {
		old := got
		old.ActivityIdentityRecipe = stamp
		if id, err := WebhookIdentity(old); !errors.Is(err, ledger.ErrUnsupportedRecipe) || id.EffectID != "" {
			t.Fatalf("stamp %q: %+v %v", stamp, id, err)
		}
	}
}

// TestCheckURLHostForms: CheckURL checks a host in every spelling: the
// absolute form (trailing dot) as the host without it, an IPv4 address
// only as four decimal numbers, a port only in 1..65535; IPv6 literals,
// IPv4-mapped ones included, keep their checks.
func TestCheckURLHostForms(t *testing.T) {
	var p WebhookPolicy
	for _, ok := range []string{"https://example.com./x", "https://203.0.113.9./", "http://[::ffff:203.0.113.9]/", "http://[2001:db8::1]:8080/",
		"https://example.com:65535/", "https://a1.example.com/", "https://123.example.com/", "https://example.123abc/"} {
		if err := p.CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://localhost./", "http://10.0.0.1./", "http://127.1/", "http://0x7f000001/", "http://2130706433/",
		"http://0177.0.0.1/", "http://1.2.3.0x4/", "https://example.com:0/", "https://example.com:65536/", "http://./", "http://[::ffff:127.0.0.1]/"} {
		if err := p.CheckURL(bad); !errors.Is(err, ErrDestinationRefused) {
			t.Errorf("%s: %v, want refused", bad, err)
		}
	}
	al := WebhookPolicy{Allow: []string{"hooks.example.com"}}
	if err := al.CheckURL("https://hooks.example.com./"); err != nil {
		t.Errorf("the allowed host with a trailing dot: %v", err)
	}
}

// TestCheckURLRefusesNonASCIIHosts: net/http maps a host holding non-ASCII
// characters through IDNA (UTS #46) before it resolves and dials it, so
// fullwidth digits and letters and ideographic full stops spell the
// loopback, metadata or private addresses and "localhost" that CheckURL
// refuses in ASCII ("１２７.０.０.１" is dialed as 127.0.0.1). Such a host
// is refused at createRun, as its ASCII spelling is; an internationalized
// name is written in its ASCII (xn--) form.
func TestCheckURLRefusesNonASCIIHosts(t *testing.T) {
	var p WebhookPolicy
	for _, bad := range []string{
		"http://１２７.０.０.１/", "http://127。0。0。1/", "http://１６９.２５４.１６９.２５４/latest/meta-data/",
		"http://ｌｏｃａｌｈｏｓｔ/", "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:8080/", "http://１０.０.０.１/", "http://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1/",
		"https://bücher.example/",
	} {
		if err := p.CheckURL(bad); !errors.Is(err, ErrDestinationRefused) {
			t.Errorf("%s: %v, want refused", bad, err)
		}
	}
	if err := p.CheckURL("https://xn--bcher-kva.example/"); err != nil {
		t.Errorf("an internationalized name in its ASCII form: %v", err)
	}
}
