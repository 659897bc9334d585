package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A header map is a plain map: a caller may fill it under any spelling
// (http.Header{"idempotency-key": …}), and net/http sends every entry as
// it is. A key header the caller set under a spelling other than the
// canonical one is the caller's key: every attempt carries it, once, under
// one name, and the Result names it. Before, the Transport looked it up
// by the canonical spelling only, minted a key of its own beside it and
// sent both: idemkit's Guard refused every attempt (two keys), and a
// server that reads the first one ran the call under the minted key, so a
// retry from another process with the caller's derived key ran it again
// (RED_TEAM 479).
func TestKeyHeaderInAnotherSpellingIsTheCallersKey(t *testing.T) {
	const key = "caller-key-0123456789abcdef"
	for _, tc := range []struct{ keyHeader, spelling string }{
		{"", "idempotency-key"},
		{"", "IDEMPOTENCY-KEY"},
		{"", "idempotency-Key"},
		{"X-Request-Key", "x-request-key"},
	} {
		var mu sync.Mutex
		var sent []http.Header
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, r.Header.Clone())
			n++
			code := 503
			if n > 1 {
				code = 201
			}
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
		})
		var w waits
		cfg := fastConfig(&w)
		cfg.Base, cfg.KeyHeader = base, tc.keyHeader
		tr, err := NewTransport(cfg)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://api.example/orders", strings.NewReader(`{"a":1}`))
		req.Header = http.Header{tc.spelling: {key}, "Content-Type": {"application/json"}}
		var res Result
		resp, err := tr.RoundTrip(req.WithContext(WithResult(context.Background(), &res)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		name := tc.keyHeader
		if name == "" {
			name = DefaultKeyHeader
		}
		if res.Key != key || res.Attempts != 2 || len(sent) != 2 {
			t.Fatalf("%s: result %+v, %d attempts sent; want the caller's key on 2", tc.spelling, res, len(sent))
		}
		for i, h := range sent {
			var names []string
			for k, v := range h {
				if strings.EqualFold(k, name) {
					names = append(names, k+"="+strings.Join(v, ","))
				}
			}
			if len(names) != 1 || names[0] != http.CanonicalHeaderKey(name)+"="+key {
				t.Fatalf("%s: attempt %d carried %q; want one %s: %s", tc.spelling, i+1, names, name, key)
			}
		}
		if len(req.Header) != 2 || req.Header[tc.spelling][0] != key {
			t.Fatalf("%s: the caller's request was changed: %v", tc.spelling, req.Header)
		}
	}
}

// A 301, 302 or 303 of a mutating call to another origin is followed as a
// GET without the key or the caller's credential: net/http copies the
// first request's header map to the hop as it is spelled, so a key or a
// credential set under another spelling ("idempotency-key",
// "authorization") must be dropped under every spelling. Before,
// checkRedirect dropped the canonical spelling only, and the other origin
// received the key and, on another port or scheme of the same host (where
// net/http keeps credentials), the credential (RED_TEAM 480).
func TestCrossOriginGetHopDropsEverySpelling(t *testing.T) {
	from, _ := http.NewRequest(http.MethodPost, "https://api.example/a", nil)
	for _, to := range []string{"https://api.example:8443/b", "https://other.example/b"} {
		get, _ := http.NewRequest(http.MethodGet, to, nil)
		get.Header = http.Header{"idempotency-key": {"k"}, "IDEMPOTENCY-KEY": {"k"}, "authorization": {"Bearer c"},
			"cookie": {"s=1"}, "proxy-authorization": {"Basic p"}, "Accept": {"application/json"}}
		if err := checkRedirect(get, []*http.Request{from}, DefaultKeyHeader); err != nil {
			t.Fatal(err)
		}
		if len(get.Header) != 1 || get.Header.Get("Accept") == "" {
			t.Errorf("GET %s carries %v; want only Accept", to, get.Header)
		}
	}

	// Through Client.Do: a 303 to another port of the same host.
	var mu sync.Mutex
	var got []string
	far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" key="+strings.Join(r.Header.Values("Idempotency-Key"), ",")+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(200)
	}))
	defer far.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, far.URL+"/new", http.StatusSeeOther)
	}))
	defer home.Close()
	var w waits
	c := mustNew(t, fastConfig(&w))
	req, _ := http.NewRequest(http.MethodPost, home.URL+"/old", strings.NewReader(`{"a":1}`))
	req.Header = http.Header{"idempotency-key": {"caller-key-0123456789abcdef"}, "authorization": {"Bearer secret-credential"}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 1 || got[0] != "GET key= auth=" {
		t.Fatalf("the other origin got %q; want the GET without the key or the credential", got)
	}
}
