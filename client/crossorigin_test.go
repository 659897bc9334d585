package client

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A 307 or 308 that sends a mutating call to another origin is not
// followed by Client.Do: the other origin would receive the call's key
// (and the body) and would keep its own record of it, so the hop could
// neither share the call's once-only guarantee nor keep its key to the
// origin it was sent to. The caller gets the redirect itself. A 303 to
// another origin (a GET) is followed without the key or the credential,
// on another port of the same host too (net/http keeps Authorization
// there: its rule is by host name only).
func TestCrossOriginRedirectKeepsTheKeyHome(t *testing.T) {
	var mu sync.Mutex
	var other []string // key and credential the other origin received
	far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		other = append(other, r.Method+" key="+strings.Join(r.Header.Values("Idempotency-Key"), ",")+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(201)
	}))
	defer far.Close()
	// Same host and scheme, another port (an origin of its own), and
	// another host name: net/http strips Authorization only from the latter.
	farURLs := map[string]string{
		"port": far.URL,
		"host": strings.Replace(far.URL, "127.0.0.1", "localhost", 1),
	}
	for name, target := range farURLs {
		for _, code := range []int{307, 308, 303} {
			t.Run(name+"/"+http.StatusText(code), func(t *testing.T) {
				mu.Lock()
				other = nil
				mu.Unlock()
				home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					http.Redirect(w, r, target+"/new", code)
				}))
				defer home.Close()
				var w waits
				c := mustNew(t, fastConfig(&w))
				for _, callerKey := range []string{"", "caller-key-0123456789abcdef"} {
					req, _ := http.NewRequest(http.MethodPost, home.URL+"/old", strings.NewReader(`{"a":1}`))
					req.Header.Set("Authorization", "Bearer secret-credential")
					if callerKey != "" {
						req.Header.Set("Idempotency-Key", callerKey)
					}
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					mu.Lock()
					got := append([]string(nil), other...)
					other = nil
					mu.Unlock()
					if code == 303 {
						if resp.StatusCode != 201 || len(got) != 1 || got[0] != "GET key= auth=" {
							t.Fatalf("303: status %d, other origin got %q; want the GET without the key or the credential", resp.StatusCode, got)
						}
						continue
					}
					if resp.StatusCode != code || len(got) != 0 || resp.Key == "" || resp.Attempts != 1 {
						t.Fatalf("caller key %q: status %d attempts %d, other origin got %q; want the %d returned, nothing sent there", callerKey, resp.StatusCode, resp.Attempts, got, code)
					}
					if loc := resp.Header.Get("Location"); loc != target+"/new" {
						t.Fatalf("Location %q", loc)
					}
				}
			})
		}
	}
}

// The origin test of checkRedirect: scheme, host and port, a missing port
// being the scheme's default; a move from http to https on the default
// ports is the same service and followed.
func TestCheckRedirectOrigins(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		follow   bool
	}{
		{"https://api.example/a", "https://api.example/b", true},
		{"https://api.example/a", "https://API.example:443/b", true},
		{"http://api.example/a", "https://api.example/b", true},
		{"http://api.example:80/a", "https://api.example:443/b", true},
		{"https://api.example/a", "http://api.example/b", false},
		{"https://api.example/a", "https://api.example:8443/b", false},
		{"https://api.example/a", "https://other.example/b", false},
		{"https://api.example/a", "https://eu.api.example/b", false},
		{"http://api.example:8080/a", "https://api.example/b", false},
	} {
		from, _ := http.NewRequest(http.MethodPost, tc.from, nil)
		to, _ := http.NewRequest(http.MethodPost, tc.to, nil)
		to.Header.Set("Idempotency-Key", "k")
		err := checkRedirect(to, []*http.Request{from}, "Idempotency-Key")
		if follow := err == nil; follow != tc.follow || err != nil && !errors.Is(err, http.ErrUseLastResponse) {
			t.Errorf("%s -> %s: err %v, want follow %v", tc.from, tc.to, err, tc.follow)
		}
		get, _ := http.NewRequest(http.MethodGet, tc.to, nil)
		get.Header.Set("Idempotency-Key", "k")
		get.Header.Set("Authorization", "Bearer c")
		get.Header.Set("Cookie", "s=1")
		if err := checkRedirect(get, []*http.Request{from}, "Idempotency-Key"); err != nil ||
			(get.Header.Get("Idempotency-Key") == "") == tc.follow || (get.Header.Get("Authorization") == "") == tc.follow || (get.Header.Get("Cookie") == "") == tc.follow {
			t.Errorf("%s -> GET %s: err %v, headers %v", tc.from, tc.to, err, get.Header)
		}
	}
}
