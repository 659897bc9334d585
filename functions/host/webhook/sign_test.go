package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// Secrets as a receiver is handed them: "whsec_" and the base64 of the
// key's bytes (24 and 32 random-looking bytes).
const (
	acmeSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	acmeOldSecret = "whsec_dGhlIHByZXZpb3VzIHNlY3JldCBvZiBhY21lISE="
	globexSecret  = "whsec_Z2xvYmV4J3Mgb3duIHNpZ25pbmcgc2VjcmV0IQ=="
)

// verifyStandardWebhook is a receiver's check, written from the Standard
// Webhooks definition and nothing of the sender's: the secret is the
// base64 after "whsec_"; the signed content is "{webhook-id}.{webhook-
// timestamp}.{body}"; webhook-signature is space-separated "v1,{base64
// HMAC-SHA256}" entries, one of which must match.
func verifyStandardWebhook(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		panic("bad test secret " + secret)
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return false
	}
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range strings.Split(sigs, " ") {
		v, b64, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// secretsOf is a SigningSecrets over whsec_ strings per tenant, counting
// its reads.
type secretsOf struct {
	mu    sync.Mutex
	m     map[string][]string
	reads int
	err   error
}

func (s *secretsOf) WebhookSecrets(_ context.Context, tenant string) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.err != nil {
		return nil, s.err
	}
	var out [][]byte
	for _, w := range s.m[tenant] {
		b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(w, "whsec_"))
		out = append(out, b)
	}
	return out, nil
}

// delivery is one request a receiver got.
type delivery struct {
	h    http.Header
	body []byte
}

// signRig is a receiver answering the statuses in turn (then 200), and a
// Webhook on a manual clock shared with its ledger.
type signRig struct {
	srv *httptest.Server
	clk *ledgertest.Clock
	w   *Webhook
	l   *ledger.Ledger
	mu  sync.Mutex
	got []delivery
}

func newSignRig(t *testing.T, secrets SigningSecrets, statuses ...int) *signRig {
	t.Helper()
	r := &signRig{clk: ledgertest.NewClock(time.Date(2026, 12, 7, 4, 30, 0, 0, time.UTC))}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, delivery{req.Header.Clone(), b})
		r.mu.Unlock()
		if n < len(statuses) {
			w.WriteHeader(statuses[n])
		}
	}))
	t.Cleanup(r.srv.Close)
	var err error
	r.l, err = ledger.New(ledger.Config{Store: ledgermem.New(), Wait: -1,
		Test: ledger.TestConfig{Clock: r.clk, Jitter: func(d time.Duration) time.Duration { return d }}})
	if err != nil {
		t.Fatal(err)
	}
	r.w = &Webhook{Ledger: r.l, Policy: WebhookPolicy{AllowLoopback: true}, Backoff: 5 * time.Second,
		Secrets: secrets, Test: TestConfig{Clock: r.clk}}
	return r
}

func (r *signRig) run(t *testing.T, tenant string) runs.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"url": r.srv.URL + "/hook", "payload": map[string]any{"order": "o-17", "total": 12.5}})
	return runs.NewRun(tenant, WorkflowWebhook, in, r.clk.Now())
}

func (r *signRig) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// TestSignedDeliveryVerifies (RED_TEAM 340): a delivery of a tenant with a
// signing secret carries webhook-id, webhook-timestamp (the clock's unix
// seconds at the send) and webhook-signature, which a receiver's own
// Standard Webhooks check accepts under that secret and refuses for a
// changed body, id or timestamp; Idempotency-Key and User-Agent are as
// before, and webhook-id names neither the key nor the run.
func TestSignedDeliveryVerifies(t *testing.T) {
	r := newSignRig(t, &secretsOf{m: map[string][]string{"acme": {acmeSecret}}})
	run := r.run(t, "acme")
	if _, err := r.w.Deliver(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	got := r.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	d := got[0]
	if !verifyStandardWebhook(acmeSecret, d.h, d.body) {
		t.Fatalf("the delivery does not verify under the tenant's secret: %v", d.h)
	}
	if ts := d.h.Get("webhook-timestamp"); ts != strconv.FormatInt(r.clk.Now().Unix(), 10) {
		t.Fatalf("webhook-timestamp %q, want the clock's %d", ts, r.clk.Now().Unix())
	}
	key := d.h.Get("Idempotency-Key")
	id := d.h.Get("webhook-id")
	if key == "" || d.h.Get("User-Agent") != "idemkit-webhook/1" || d.h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v: want Idempotency-Key, User-Agent and Content-Type as before", d.h)
	}
	if !strings.HasPrefix(id, "msg_") || strings.Contains(id, key) || strings.Contains(key, strings.TrimPrefix(id, "msg_")) || strings.Contains(id, run.ID) {
		t.Fatalf("webhook-id %q: want msg_ and a hash, naming neither the key %q nor the run", id, key)
	}
	// The check is a real one: any change is refused.
	for name, change := range map[string]func(h http.Header, b []byte) (http.Header, []byte){
		"body": func(h http.Header, b []byte) (http.Header, []byte) {
			return h, []byte(strings.Replace(string(b), "o-17", "o-18", 1))
		},
		"id":        func(h http.Header, b []byte) (http.Header, []byte) { h.Set("webhook-id", "msg_other"); return h, b },
		"timestamp": func(h http.Header, b []byte) (http.Header, []byte) { h.Set("webhook-timestamp", "1"); return h, b },
	} {
		h, b := change(d.h.Clone(), d.body)
		if verifyStandardWebhook(acmeSecret, h, b) {
			t.Errorf("a delivery with its %s changed still verifies", name)
		}
	}
	if verifyStandardWebhook(globexSecret, d.h, d.body) {
		t.Fatal("the delivery verifies under a secret it was not signed with")
	}
}

// TestSignedRetriesKeepWebhookID: every try of one effect carries the same
// webhook-id (a receiver deduplicates by it as by Idempotency-Key), a
// timestamp of its own send, and a signature that verifies.
func TestSignedRetriesKeepWebhookID(t *testing.T) {
	r := newSignRig(t, &secretsOf{m: map[string][]string{"acme": {acmeSecret}}}, http.StatusServiceUnavailable, http.StatusInternalServerError)
	run := r.run(t, "acme")
	ctx := context.Background()
	var stamps []int64
	for i := 0; i < 3; i++ {
		stamps = append(stamps, r.clk.Now().Unix())
		_, err := r.w.Deliver(ctx, run)
		var later *ledger.RetryLaterError
		if i < 2 && !errors.As(err, &later) || i == 2 && err != nil {
			t.Fatalf("try %d: %v", i+1, err)
		}
		r.clk.Advance(time.Minute)
	}
	got := r.deliveries()
	if len(got) != 3 {
		t.Fatalf("%d deliveries, want 3", len(got))
	}
	for i, d := range got {
		if !verifyStandardWebhook(acmeSecret, d.h, d.body) {
			t.Errorf("try %d does not verify", i+1)
		}
		if d.h.Get("webhook-id") != got[0].h.Get("webhook-id") || d.h.Get("Idempotency-Key") != got[0].h.Get("Idempotency-Key") {
			t.Errorf("try %d: webhook-id %q, Idempotency-Key %q; want the first try's %q, %q", i+1,
				d.h.Get("webhook-id"), d.h.Get("Idempotency-Key"), got[0].h.Get("webhook-id"), got[0].h.Get("Idempotency-Key"))
		}
		if ts := d.h.Get("webhook-timestamp"); ts != strconv.FormatInt(stamps[i], 10) {
			t.Errorf("try %d: webhook-timestamp %s, want its own send's %d", i+1, ts, stamps[i])
		}
	}
	// Another effect (another run) has another webhook-id.
	other := r.run(t, "acme")
	if _, err := r.w.Deliver(ctx, other); err != nil {
		t.Fatal(err)
	}
	if got := r.deliveries(); got[3].h.Get("webhook-id") == got[0].h.Get("webhook-id") {
		t.Fatal("two effects share a webhook-id")
	}
}

// TestRotationSendsBothSignatures: during a rotation (a current and a
// previous secret) the header carries two signatures, the current one
// first, so a receiver holding either secret accepts the delivery.
func TestRotationSendsBothSignatures(t *testing.T) {
	r := newSignRig(t, &secretsOf{m: map[string][]string{"acme": {acmeSecret, acmeOldSecret}}})
	if _, err := r.w.Deliver(context.Background(), r.run(t, "acme")); err != nil {
		t.Fatal(err)
	}
	d := r.deliveries()[0]
	sigs := strings.Split(d.h.Get("webhook-signature"), " ")
	if len(sigs) != 2 {
		t.Fatalf("webhook-signature %q: want two signatures", d.h.Get("webhook-signature"))
	}
	for _, s := range []string{acmeSecret, acmeOldSecret} {
		if !verifyStandardWebhook(s, d.h, d.body) {
			t.Errorf("a receiver holding %s refuses the delivery", s[:10])
		}
	}
	only := d.h.Clone()
	only.Set("webhook-signature", sigs[0])
	if !verifyStandardWebhook(acmeSecret, only, d.body) || verifyStandardWebhook(acmeOldSecret, only, d.body) {
		t.Fatal("the first signature is not the current secret's")
	}
}

// TestAnotherTenantsSecretNeverSigns: a delivery is signed with its own
// tenant's secrets only (one tenant's receiver cannot forge another's
// deliveries), and a tenant without a secret is sent unsigned, as before.
func TestAnotherTenantsSecretNeverSigns(t *testing.T) {
	src := &secretsOf{m: map[string][]string{"acme": {acmeSecret, acmeOldSecret}, "globex": {globexSecret}}}
	r := newSignRig(t, src)
	ctx := context.Background()
	for _, tn := range []string{"globex", "initech"} {
		if _, err := r.w.Deliver(ctx, r.run(t, tn)); err != nil {
			t.Fatal(err)
		}
	}
	got := r.deliveries()
	g, i := got[0], got[1]
	if !verifyStandardWebhook(globexSecret, g.h, g.body) {
		t.Fatal("globex's delivery does not verify under globex's secret")
	}
	for _, s := range []string{acmeSecret, acmeOldSecret} {
		if verifyStandardWebhook(s, g.h, g.body) {
			t.Fatal("globex's delivery verifies under acme's secret")
		}
	}
	if n := len(strings.Split(g.h.Get("webhook-signature"), " ")); n != 1 {
		t.Fatalf("globex's delivery carries %d signatures, want its one", n)
	}
	for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		if v := i.h.Get(h); v != "" {
			t.Errorf("a tenant without a secret: %s %q, want the delivery unsigned", h, v)
		}
	}
	if i.h.Get("Idempotency-Key") == "" {
		t.Fatal("an unsigned delivery lost its Idempotency-Key")
	}
}

// TestSecretReadErrorSendsNothing: when the tenant's secrets cannot be
// read, Deliver returns the error before the effect is claimed: nothing
// is sent (never unsigned in place of signed) and no attempt is spent.
func TestSecretReadErrorSendsNothing(t *testing.T) {
	src := &secretsOf{m: map[string][]string{"acme": {acmeSecret}}, err: errors.New("store down")}
	r := newSignRig(t, src)
	run := r.run(t, "acme")
	if _, err := r.w.Deliver(context.Background(), run); err == nil || !strings.Contains(err.Error(), "signing secret") {
		t.Fatalf("Deliver: %v; want the secret read's error", err)
	}
	if n := len(r.deliveries()); n != 0 {
		t.Fatalf("%d deliveries; want none", n)
	}
	if p, err := r.l.Witness(context.Background(), run.ID); err != nil || len(p.Effects) != 0 {
		t.Fatalf("witness %+v %v; want no effect claimed", p.Effects, err)
	}
	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	if _, err := r.w.Deliver(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if d := r.deliveries(); len(d) != 1 || !verifyStandardWebhook(acmeSecret, d[0].h, d[0].body) {
		t.Fatal("the delivery after the store came back is not signed")
	}
}

// TestReceiverDeduplicatesByTheSignedID (RED_TEAM 348): the signature
// covers webhook-id and not Idempotency-Key, so a signed delivery sent
// again within the receiver's tolerance under another Idempotency-Key
// still verifies, and under another webhook-id does not: a receiver that
// verifies deduplicates by webhook-id, and SECURITY.md's receiver steps
// say so and never offer Idempotency-Key in its place (a captured
// delivery could then be sent again under a key not yet seen, or under
// the key of a delivery yet to come, which its genuine delivery would
// then find spent).
func TestReceiverDeduplicatesByTheSignedID(t *testing.T) {
	r := newSignRig(t, &secretsOf{m: map[string][]string{"acme": {acmeSecret}}})
	if _, err := r.w.Deliver(context.Background(), r.run(t, "acme")); err != nil {
		t.Fatal(err)
	}
	d := r.deliveries()[0]
	again := d.h.Clone()
	again.Set("Idempotency-Key", "a-key-no-delivery-carried")
	if !verifyStandardWebhook(acmeSecret, again, d.body) {
		t.Fatal("a delivery under another Idempotency-Key does not verify: the signature covers it after all")
	}
	again = d.h.Clone()
	again.Set("webhook-id", "msg_"+strings.Repeat("0", 32))
	if verifyStandardWebhook(acmeSecret, again, d.body) {
		t.Fatal("a delivery under another webhook-id verifies")
	}
	doc, err := os.ReadFile("../../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(doc), "### 8. Webhook signatures")
	sec, _, _ = strings.Cut(sec, "\n### ")
	steps := strings.Join(strings.Fields(sec), " ")
	if !strings.Contains(steps, "deduplicates by `webhook-id`") {
		t.Fatal("SECURITY.md's receiver steps do not deduplicate by webhook-id")
	}
	for _, bad := range []string{"by `webhook-id` (or `Idempotency-Key`)", "deduplicates by `Idempotency-Key`", "or by `Idempotency-Key`"} {
		if strings.Contains(steps, bad) {
			t.Fatalf("SECURITY.md's receiver steps offer Idempotency-Key, which no signature covers, for deduplication: %q", bad)
		}
	}
	if !strings.Contains(steps, "`Idempotency-Key` is not signed") {
		t.Fatal("SECURITY.md does not say Idempotency-Key is not signed")
	}
}
