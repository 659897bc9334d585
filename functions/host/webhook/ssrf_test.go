package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestWebhookPolicyRefusesNonGlobalAddresses: every address a webhook must
// never reach from inside AWS is refused by CheckIP (the dial-time check),
// including the ones the netip predicates do not cover: "this network"
// (0.0.0.0/8 dials the local host on Linux), reserved and benchmarking
// ranges, the IPv6 instance-metadata address (refused even when private
// destinations are allowed), and IPv4 addresses embedded in NAT64, 6to4 and
// IPv4-compatible IPv6 addresses.
func TestWebhookPolicyRefusesNonGlobalAddresses(t *testing.T) {
	var zero WebhookPolicy
	private := WebhookPolicy{AllowPrivate: true}
	always := []string{
		"127.0.0.1", "::1", "169.254.169.254", "169.254.170.2", "fe80::1", "0.0.0.0", "0.1.2.3", "::",
		"192.0.0.8", "198.18.0.1", "198.19.255.254", "240.0.0.1", "255.255.255.255", "224.0.0.1", "ff02::1",
		"fd00:ec2::254", "fd00:ec2::253", // IMDS and the VPC resolver over IPv6 (Nitro)
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", // NAT64 of loopback / IMDS
		"2002:7f00:1::1", "2002:a9fe:a9fe::1", // 6to4 of loopback / IMDS
		"::7f00:1", "::a9fe:a9fe", // IPv4-compatible
		"::ffff:169.254.169.254", "2001::1", // IPv4-mapped IMDS, Teredo
		// The local-use NAT64 prefix (any prefix length: RFC 6052 places
		// the IPv4 address elsewhere below /96), SIIT IPv4-translated
		// addresses and the discard prefix.
		"64:ff9b:1:a9fe:a9:fe00:808:808", "64:ff9b:1:7f00:1:0:808:808", "::ffff:0:a9fe:a9fe", "::ffff:0:7f00:1",
		"::ffff:0:808:808", "100::1",
	}
	for _, s := range always {
		for _, p := range []WebhookPolicy{zero, private} {
			if err := p.CheckIP(netip.MustParseAddr(s)); !errors.Is(err, ErrDestinationRefused) {
				t.Errorf("%s (AllowPrivate=%v): admitted", s, p.AllowPrivate)
			}
		}
		if err := zero.CheckURL("http://[" + s + "]/"); strings.Contains(s, ":") && !errors.Is(err, ErrDestinationRefused) {
			t.Errorf("CheckURL %s: admitted", s)
		}
	}
	privateOnly := []string{"10.0.0.1", "172.16.0.1", "192.168.1.1", "fd12::1", "100.64.0.1", "100.127.255.254", "64:ff9b::a00:1", "2002:a00:1::1"}
	for _, s := range privateOnly {
		if err := zero.CheckIP(netip.MustParseAddr(s)); !errors.Is(err, ErrDestinationRefused) {
			t.Errorf("%s: admitted without AllowPrivate", s)
		}
		if err := private.CheckIP(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: refused with AllowPrivate: %v", s, err)
		}
	}
	for _, s := range []string{"8.8.8.8", "203.0.113.9", "2606:4700:4700::1111", "64:ff9b::808:808", "100.128.0.1", "2001:db8::1"} {
		if err := zero.CheckIP(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: refused: %v", s, err)
		}
	}
	loop := WebhookPolicy{AllowLoopback: true}
	for _, s := range []string{"127.0.0.1", "::1"} {
		if err := loop.CheckIP(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s with AllowLoopback: %v", s, err)
		}
	}
	if err := loop.CheckIP(netip.MustParseAddr("169.254.169.254")); err == nil {
		t.Error("AllowLoopback admitted the metadata address")
	}
}

// TestWebhookClientChecksAtDialTime: the address check runs on the resolved
// address of every connection, so a host name that resolves to a refused
// address (DNS rebinding; here "localhost" sent
// straight to the client, past CheckURL) is refused before any byte is sent.
func TestWebhookClientChecksAtDialTime(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	var p WebhookPolicy
	c := p.HTTPClient(5 * time.Second)
	for _, u := range []string{srv.URL, "http://localhost" + port + "/"} {
		resp, err := c.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: connected", u)
		}
		if !errors.Is(err, ErrDestinationRefused) {
			t.Fatalf("%s: %v, want ErrDestinationRefused", u, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the refused destination received %d requests", hits.Load())
	}
}

// TestWebhookDoesNotFollowRedirects: a provider answering a redirect (here
// toward the metadata address) is answered as the final response, recorded
// as the effect's failure; the redirect target is never contacted. The
// response body read is bounded and a slow provider is cut by the timeout.
func TestWebhookDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Add(1) }))
	defer target.Close()
	for _, loc := range []string{"http://169.254.169.254/latest/meta-data/", target.URL + "/x"} {
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, loc, http.StatusTemporaryRedirect)
		}))
		w := newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
		_, err := w.Deliver(context.Background(), webhookRun(t, redirect.URL))
		redirect.Close()
		var fe *ledger.FailedError
		if !errors.As(err, &fe) || !strings.Contains(fe.Message, "307") {
			t.Fatalf("redirect to %s: %v", loc, err)
		}
	}
	if followed.Load() != 0 {
		t.Fatalf("a redirect was followed %d times", followed.Load())
	}
}

// TestWebhookTimeoutAndBoundedBody: a provider that never answers is cut by
// Timeout (the try is uncertain, retried under the same key, then given
// up); one that streams an endless body is read at most 1 MiB.
func TestWebhookTimeoutAndBoundedBody(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer hang.Close()
	defer close(release)
	w := newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
	w.Timeout, w.MaxTries = 100*time.Millisecond, 2
	if _, err := w.Deliver(context.Background(), webhookRun(t, hang.URL)); !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("hanging provider: %v", err)
	}

	var sent atomic.Int64
	endless := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusOK)
		buf := make([]byte, 32<<10)
		for {
			n, err := rw.Write(buf)
			sent.Add(int64(n))
			if err != nil || sent.Load() > 64<<20 {
				return
			}
		}
	}))
	defer endless.Close()
	w = newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
	if _, err := w.Deliver(context.Background(), webhookRun(t, endless.URL)); err != nil {
		t.Fatalf("endless body: %v", err)
	}
	if n := sent.Load(); n > 32<<20 {
		t.Fatalf("the sender read an unbounded body: the provider wrote %d bytes", n)
	}
}

func newTestWebhook(t *testing.T, p WebhookPolicy) *Webhook {
	t.Helper()
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	return &Webhook{Ledger: l, Policy: p, MaxTries: 1, Backoff: time.Millisecond, WaitInline: time.Second}
}

func webhookRun(t *testing.T, url string) runs.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"url": url, "payload": map[string]any{"a": 1}})
	return runs.NewRun("acme", WorkflowWebhook, in, time.Now())
}

// TestWebhookClientIgnoresProxyEnvironment: the sender's client sets no
// proxy, so HTTP_PROXY and HTTPS_PROXY (which would carry every request to
// a proxy the dial-time check never sees past) are ignored: a delivery to a
// name that does not resolve fails to dial and the proxy receives nothing.
func TestWebhookClientIgnoresProxyEnvironment(t *testing.T) {
	var hits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	var p WebhookPolicy
	if tr, ok := p.HTTPClient(time.Second).Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Fatal("the webhook client's transport has a proxy function")
	}
	w := newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
	if _, err := w.Deliver(context.Background(), webhookRun(t, "http://webhook.invalid/x")); err == nil {
		t.Fatal("a delivery to an unresolvable name succeeded")
	}
	if hits.Load() != 0 {
		t.Fatalf("the proxy from the environment received %d requests", hits.Load())
	}
}

// TestWebhookBoundsResponseHeaders: a receiver answering with more than
// 64 KiB of headers (one 1 MiB header; or 103 Early Hints answers repeated
// past the bound, each under it) is not read past the bound: the try ends
// uncertain (the receiver had the request), never a recorded success.
func TestWebhookBoundsResponseHeaders(t *testing.T) {
	big := strings.Repeat("a", 1<<20)
	for name, h := range map[string]http.HandlerFunc{
		"one header": func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("X-Big", big)
			rw.WriteHeader(http.StatusOK)
		},
		"early hints": func(rw http.ResponseWriter, _ *http.Request) {
			for range 64 {
				rw.Header().Set("Link", "<"+big[:60<<10]+">")
				rw.WriteHeader(http.StatusEarlyHints)
			}
			rw.Header().Del("Link")
			rw.WriteHeader(http.StatusOK)
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			w := newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
			_, err := w.Deliver(context.Background(), webhookRun(t, srv.URL))
			var ex *ledger.AttemptsExhaustedError
			if !errors.As(err, &ex) || !ex.Escaped || !strings.Contains(err.Error(), "exceeded") {
				t.Fatalf("%v, want the try uncertain on the header bound", err)
			}
		})
	}
}
