package webhook

import (
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
)

// TestWebhookBusinessKeyInput: inputs.businessKey is optional; when present
// it must be a non-empty string of at most maxBusinessKeyBytes bytes
// without NUL, and the payload must canonicalize (it is digested).
func TestWebhookBusinessKeyInput(t *testing.T) {
	p := &WebhookPolicy{}
	body := func(bk string) []byte {
		return []byte(`{"workflowId":"webhook","inputs":{"url":"https://example.com/h","payload":{"n":1},"businessKey":` + bk + `}}`)
	}
	r, e := ParseCreate(body(`"order-7/confirm"`), p)
	if e != nil || r.BusinessKey != "order-7/confirm" {
		t.Fatal(r, e)
	}
	if bk, err := webhookBusinessKey(r.Inputs); err != nil || bk != "order-7/confirm" {
		t.Fatal(bk, err)
	}
	long, _ := json.Marshal(strings.Repeat("k", maxBusinessKeyBytes))
	if r, e := ParseCreate(body(string(long)), p); e != nil || len(r.BusinessKey) != maxBusinessKeyBytes {
		t.Fatal(e)
	}
	tooLong, _ := json.Marshal(strings.Repeat("k", maxBusinessKeyBytes+1))
	for _, bk := range []string{`""`, `null`, `5`, `{"a":1}`, `"a\u0000b"`, string(tooLong)} {
		_, e := ParseCreate(body(bk), p)
		if e == nil || e.Status != 400 || e.Details["field"] != "inputs.businessKey" {
			t.Errorf("businessKey %s: %v", bk, e)
		}
	}
	// Absent: no business key, and the activity recipe keys the effect.
	r, e = ParseCreate([]byte(`{"workflowId":"webhook","inputs":{"url":"https://example.com/h"}}`), p)
	if e != nil || r.BusinessKey != "" {
		t.Fatal(r, e)
	}
	if bk, err := webhookBusinessKey(r.Inputs); err != nil || bk != "" {
		t.Fatal(bk, err)
	}
}

// TestWebhookIdentityKeying: with inputs.businessKey the webhook identity is
// the business identity (tenant, "webhook", key), the same for every run of
// the tenant and distinct across tenants; without it, the run's stamped
// activity recipe.
func TestWebhookIdentityKeying(t *testing.T) {
	in := json.RawMessage(`{"url":"https://example.com/h","businessKey":"order-7"}`)
	a := runs.NewRun("acme", WorkflowWebhook, in, time.Now())
	b := runs.NewRun("acme", WorkflowWebhook, in, time.Now())
	other := runs.NewRun("globex", WorkflowWebhook, in, time.Now())
	ia, err := WebhookIdentity(a)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: WebhookOperation, Key: "order-7"})
	ib, _ := WebhookIdentity(b)
	iother, _ := WebhookIdentity(other)
	if ia != want || ib != want || ia.Keying != identity.KeyingBusinessIdentity || iother.EffectID == ia.EffectID || iother.ProviderKey == ia.ProviderKey {
		t.Fatalf("identities %+v %+v %+v, want %+v", ia, ib, iother, want)
	}
	plain := runs.NewRun("acme", WorkflowWebhook, json.RawMessage(`{"url":"https://example.com/h"}`), time.Now())
	if ip, err := WebhookIdentity(plain); err != nil || ip.Keying != identity.KeyingActivityRecipe {
		t.Fatal(ip, err)
	}
	// A business-keyed run still needs its stamps; a bad stored key is an
	// invalid identity.
	unstamped := a
	unstamped.Stamps = identity.Stamps{}
	if _, err := WebhookIdentity(unstamped); !errors.Is(err, ledger.ErrUnsupportedRecipe) {
		t.Fatalf("unstamped: %v", err)
	}
	bad := runs.NewRun("acme", WorkflowWebhook, json.RawMessage(`{"url":"https://example.com/h","businessKey":""}`), time.Now())
	if _, err := WebhookIdentity(bad); !errors.Is(err, ledger.ErrInvalidIdentity) {
		t.Fatalf("empty stored key: %v", err)
	}
}

// TestWebhookDigestCanonical: the business-keyed request digest ignores
// JSON formatting and member order, and changes with the URL or payload.
func TestWebhookDigestCanonical(t *testing.T) {
	d1, err := webhookDigest("https://example.com/h", json.RawMessage(`{"a":1,"b":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := webhookDigest("https://example.com/h", json.RawMessage(" {\"b\":[1, 2], \"a\":1.0}"))
	d3, _ := webhookDigest("https://example.com/i", json.RawMessage(`{"a":1,"b":[1,2]}`))
	d4, _ := webhookDigest("https://example.com/h", json.RawMessage(`{"a":2,"b":[1,2]}`))
	if d1 != d2 || d1 == d3 || d1 == d4 || len(d1) != 64 {
		t.Fatalf("digests %s %s %s %s", d1, d2, d3, d4)
	}
}

// TestWebhookDigestRefusesInexactNumbers: RFC 8785 writes every number as
// a double, so an integer beyond 2^53 (or a fraction no double holds) and
// its neighbour have one canonical form. The business-keyed request digest
// refuses such a payload rather than hashing it equal to a neighbour's
// (two runs of one business key asking for different deliveries would
// share a digest, and the second would get the first's outcome), and so
// does the create that carries it.
func TestWebhookDigestRefusesInexactNumbers(t *testing.T) {
	for _, payload := range []string{
		`{"amount":1152921504606846977}`,
		`{"ids":[9007199254740993]}`,
		`{"x":0.1000000000000000000000001}`,
	} {
		if d, err := webhookDigest("https://example.com/h", json.RawMessage(payload)); err == nil {
			t.Errorf("webhookDigest(%s) = %s; want it refused (its canonical form has another value)", payload, d)
		}
		body := `{"workflowId":"webhook","inputs":{"url":"https://example.com/h","payload":` + payload + `,"businessKey":"order-9"}}`
		if _, e := ParseCreate([]byte(body), &WebhookPolicy{}); e == nil || e.Status != 400 || e.Details["field"] != "inputs.payload" {
			t.Errorf("create with payload %s: %v; want 400 on inputs.payload", payload, e)
		}
	}
	// One value in two spellings is still one digest.
	a, err := webhookDigest("https://example.com/h", json.RawMessage(`{"n":256.0}`))
	b, _ := webhookDigest("https://example.com/h", json.RawMessage(`{"n":2.56e2}`))
	if err != nil || a != b {
		t.Fatalf("256.0 and 2.56e2: %s %s %v", a, b, err)
	}
}
