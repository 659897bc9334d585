package apifn

import (
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
)

// TestLayer1OffAdvertisesNoIdempotency: with Layer 1 off
// (IDEMPOTENCY_ENABLED=false, a disabled Guard) the same Idempotency-Key
// twice creates two runs, so the discovery document must not claim the
// idempotency family: it has no `idempotency` member and no
// extensions["idemkit.idempotency"] (there is no active policy), the rest
// of it unchanged. getRunEffects, gated on `idempotency` (runs.md), then
// answers as a gated operation the host does not advertise, 404 not_found
// whatever the method and with or without a credential, and a snapshot
// links no effectsUrl. A keyed create runs directly: no replay marker on
// either answer. With Layer 1 on, the document is the one CapabilitiesDoc
// gives, byte for byte.
func TestLayer1OffAdvertisesNoIdempotency(t *testing.T) {
	on := newFixture(t)
	r, _ := on.do(t, ev("GET", "/.well-known/openwop", "", "", ""))
	want, err := settings.CapabilitiesDoc(settings.CrossRegionSingle)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != 200 || r.Body != string(want) {
		t.Fatalf("Layer 1 on: discovery %d %s, want %s", r.StatusCode, r.Body, want)
	}

	f := hostOf(t, runs.NewMemRuns(), idem.Config{Disabled: true}, nil)
	r, m := f.do(t, ev("GET", "/.well-known/openwop", "", "", ""))
	if r.StatusCode != 200 {
		t.Fatalf("Layer 1 off: discovery %d %s", r.StatusCode, r.Body)
	}
	if _, ok := m["idempotency"]; ok {
		t.Errorf("Layer 1 off: discovery advertises the idempotency family: %s", r.Body)
	}
	ext, _ := m["extensions"].(map[string]any)
	if _, ok := ext[settings.ExtensionIdempotency]; ok {
		t.Errorf("Layer 1 off: discovery names an idempotency policy: %s", r.Body)
	}
	for _, k := range []string{"protocolVersions", "preferredVersion", "implementation", "fixtures", "replay"} {
		if m[k] == nil {
			t.Errorf("Layer 1 off: discovery lost %s: %s", k, r.Body)
		}
	}
	if ext["idemkit.workflows"] == nil {
		t.Errorf("Layer 1 off: discovery lost extensions[idemkit.workflows]: %s", r.Body)
	}

	// The same key twice: two runs, neither answer a replay.
	var ids []string
	for i := range 2 {
		r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop"}`))
		if r.StatusCode != 201 {
			t.Fatalf("create %d: %d %v", i, r.StatusCode, m)
		}
		for h := range r.Headers {
			if strings.Contains(strings.ToLower(h), "replay") {
				t.Errorf("create %d under Layer 1 off carries %s: %v", i, h, r.Headers)
			}
		}
		id, _ := m["runId"].(string)
		ids = append(ids, id)
	}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Fatalf("Layer 1 off: the same key twice gave runs %q (want two runs)", ids)
	}

	run := "/runs/" + runs.ProjectID(ids[0])
	for _, c := range []struct{ method, tenant string }{{"GET", "acme"}, {"HEAD", "acme"}, {"GET", ""}, {"POST", "acme"}} {
		r, m := f.do(t, ev(c.method, run+"/effects", c.tenant, "", ""))
		if r.StatusCode != 404 || (c.method != "HEAD" && m["error"] != "not_found") || r.Headers["Allow"] != "" {
			t.Errorf("Layer 1 off: %s %s/effects (tenant %q): %d %v Allow %q, want 404 not_found", c.method, run, c.tenant, r.StatusCode, m, r.Headers["Allow"])
		}
	}
	r, m = f.do(t, ev("GET", run, "acme", "", ""))
	x, _ := m["extensions"].(map[string]any)
	own, _ := x[ExtensionRun].(map[string]any)
	if r.StatusCode != 200 || own == nil {
		t.Fatalf("Layer 1 off: GET %s: %d %v", run, r.StatusCode, m)
	}
	if u, ok := own["effectsUrl"]; ok {
		t.Errorf("Layer 1 off: the snapshot links %v, which answers 404", u)
	}

	// With Layer 1 on the witness is served and linked.
	r, m = on.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop"}`))
	id, _ := m["runId"].(string)
	if r.StatusCode != 201 || id == "" {
		t.Fatalf("Layer 1 on: create %d %v", r.StatusCode, m)
	}
	if r, m := on.do(t, ev("GET", "/runs/"+runs.ProjectID(id)+"/effects", "acme", "", "")); r.StatusCode != 200 {
		t.Errorf("Layer 1 on: GET effects %d %v, want 200", r.StatusCode, m)
	}
	r, m = on.do(t, ev("GET", "/runs/"+runs.ProjectID(id), "acme", "", ""))
	x, _ = m["extensions"].(map[string]any)
	if own, _ := x[ExtensionRun].(map[string]any); own["effectsUrl"] == nil {
		t.Errorf("Layer 1 on: the snapshot has no effectsUrl: %v", m)
	}
}

// TestLayer1OffStoreUnavailableNamesNoKey: with Layer 1 off a key is not
// read, so the 503 idemkit.store_unavailable of a keyed write does not tell
// the caller to retry with the same Idempotency-Key (a retry would not be
// answered from a record): it says to retry after Retry-After only.
func TestLayer1OffStoreUnavailableNamesNoKey(t *testing.T) {
	rs := &downGetRuns{throttledRuns{MemRuns: runs.NewMemRuns(), down: true}}
	f := hostOf(t, rs, idem.Config{Disabled: true}, nil)
	f.runs = rs.MemRuns
	r := f.newRun(t, "acme")
	resp, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(r.ID)+"/cancel", "acme", key1, `{}`))
	msg, _ := m["message"].(string)
	if resp.StatusCode != 503 || m["error"] != idem.CodeStoreUnavailable || strings.Contains(msg, "Idempotency-Key") || !strings.Contains(msg, "Retry-After") {
		t.Errorf("keyed cancel, store down, Layer 1 off: %d %v", resp.StatusCode, m)
	}
}
