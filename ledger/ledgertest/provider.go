package ledgertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/internal/ids"
	"github.com/idemkit/idemkit/internal/stranger"
)

// Provider is a counting fake external provider that honours
// Idempotency-Key over real HTTP (an httptest server): the first request
// with a key performs an effect (counted) and its response is replayed to
// every later request with the same key. It rejects a missing key or one
// outside the OpenWOP grammar with 400. Safe for concurrent use.
//
// It counts only its own test's requests: Call sends them under a path
// token fresh for each Provider, and a request without it (another test's,
// reaching a loopback port that test had freed and this one reused) is
// answered 404, not counted, and reported with t.Errorf (method, path and
// headers, credentials masked and keys hashed).
type Provider struct {
	t        testing.TB
	token    string
	srv      *httptest.Server
	mu       sync.Mutex
	byKey    map[string]string
	effects  int
	requests int
	keys     []string
}

// NewProvider starts a Provider, closed when t ends.
func NewProvider(t testing.TB) *Provider {
	p := &Provider{t: t, token: stranger.Token(), byKey: map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	if !stranger.Own(r, p.token) {
		p.t.Errorf("ledgertest: the provider of %s received a request not sent by its test (not counted): %s", p.t.Name(), stranger.Describe(r))
		http.NotFound(w, r)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	p.keys = append(p.keys, key)
	if !ids.ValidKey(key) {
		http.Error(w, "bad Idempotency-Key", http.StatusBadRequest)
		return
	}
	resp, ok := p.byKey[key]
	if !ok {
		p.effects++
		resp = fmt.Sprintf("effect-%d:%s", p.effects, body)
		p.byKey[key] = resp
	} else {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	_, _ = io.WriteString(w, resp)
}

// Call sends body with Idempotency-Key: key and returns the provider's
// response (the same for every call with that key).
func (p *Provider) Call(ctx context.Context, key, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.URL+p.token+"/effects", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("provider: %d %s", resp.StatusCode, b)
	}
	return b, nil
}

// Effects is the number of real effects performed (distinct keys).
func (p *Provider) Effects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effects
}

// Requests is the number of requests received (duplicates included).
func (p *Provider) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// Keys returns the Idempotency-Key of every request, in arrival order.
func (p *Provider) Keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}
