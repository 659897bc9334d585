package apifn

import (
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// TestDedupHeaderIsInTheFingerprint: `OpenWOP-Dedup: enforce` changes
// what a create does (it may be refused while a live run holds its
// scope), so it is part of the request a key binds: the same key and body
// with and without it are different requests, 409
// idempotency_key_mismatch, never one answered by the other's replay. A
// key that created an unscoped run is not replayed to an enforced create
// while another live run holds the scope (two live runs of the scope,
// the enforced request told 201), and the reverse. Whitespace around the
// value reads the same (as the create reads it): a replay.
func TestDedupHeaderIsInTheFingerprint(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{}, nil)
	plain := func(key string) map[string]any {
		t.Helper()
		e := enforced("acme", key, "order-31")
		delete(e.Headers, "openwop-dedup")
		r, m := f.do(t, e)
		if r.StatusCode != http.StatusCreated && r.StatusCode != http.StatusConflict {
			t.Fatalf("unscoped create: %d %s", r.StatusCode, r.Body)
		}
		m["status"] = r.StatusCode
		return m
	}
	k := dedupKey("fingerprint", 0)
	if m := plain(k); m["status"] != http.StatusCreated {
		t.Fatalf("the unscoped create: %v", m)
	}
	r, m := f.do(t, enforced("acme", dedupKey("fingerprint", 1), "order-31"))
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("the scope's holder: %d %s", r.StatusCode, r.Body)
	}
	holder, _ := m["runId"].(string)
	r, m = f.do(t, enforced("acme", k, "order-31"))
	if r.StatusCode != http.StatusConflict || m["error"] != "idempotency_key_mismatch" {
		t.Fatalf("the unscoped create's key, enforced, while %s holds the scope: %d %s %v, want 409 idempotency_key_mismatch", holder, r.StatusCode, r.Body, r.Headers)
	}

	k2 := dedupKey("fingerprint", 2)
	r, _ = f.do(t, enforced("acme", k2, "order-32"))
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("an enforced create: %d %s", r.StatusCode, r.Body)
	}
	first := r.Body
	e := enforced("acme", k2, "order-32")
	delete(e.Headers, "openwop-dedup")
	if r, m = f.do(t, e); r.StatusCode != http.StatusConflict || m["error"] != "idempotency_key_mismatch" {
		t.Fatalf("the enforced create's key without the header: %d %s, want 409 idempotency_key_mismatch", r.StatusCode, r.Body)
	}
	e = enforced("acme", k2, "order-32")
	e.Headers["openwop-dedup"] = " enforce\t"
	if r, _ = f.do(t, e); r.StatusCode != http.StatusCreated || r.Body != first {
		t.Fatalf("the enforced create's key with the value in whitespace: %d %s, want its replay %s", r.StatusCode, r.Body, first)
	}
}
