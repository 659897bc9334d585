package host

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
)

func TestRunIDProjection(t *testing.T) {
	for _, id := range []string{"acme/abcdefghijklmnop", "anon:x/abc-._defghijklmnop", "t.1/AAAAAAAAAAAAAAAAAAAAAA"} {
		p := ProjectID(id)
		if strings.ContainsAny(p, "/:") {
			t.Fatalf("%s projected to %s", id, p)
		}
		for _, raw := range [][]string{{p}, {strings.ReplaceAll(id, "/", "%2F")}, {strings.ReplaceAll(id, "/", "%2f")}, strings.SplitN(id, "/", 2)} {
			got, err := DecodePathID(raw...)
			if err != nil || got != id {
				t.Errorf("DecodePathID(%q) = %q, %v; want %q", raw, got, err, id)
			}
		}
	}
	if ProjectID("anon:a/b~c") != "anon~3Aa~2Fb~7Ec" {
		t.Fatal(ProjectID("anon:a/b~c"))
	}
	for _, bad := range []string{"acme~2", "acme~ZZabcdefghijklmnop", "acme~2Fshort", "acme", "acme%ZZ", "a~2Fb~2Fcccccccccccccccccc", "~2Fabcdefghijklmnop"} {
		if _, err := DecodePathID(bad); !errors.Is(err, ErrBadID) {
			t.Errorf("DecodePathID(%q): %v", bad, err)
		}
	}
	id := NewRunID("acme")
	if !ValidRunID(id) || RunTenant(id) != "acme" || strings.Contains(id[5:], "~") {
		t.Fatal(id)
	}
}

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
	u, pl, err := WebhookInputs(r.Inputs)
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

func TestLoadEnv(t *testing.T) {
	env := map[string]string{
		EnvRunsTable: "r", EnvEffectLease: "60", EnvEffectRetention: "30", EnvCrossRegion: "reconciled-records",
		EnvWebhookAllowlist: "a.com, *.b.com", EnvWebhookLoopback: "true", "IDEMPOTENCY_TABLE": "i", EnvStreamMaxRetries: "3",
	}
	e, err := LoadEnv(func(k string) string { return env[k] })
	if err != nil || e.EffectLease.Seconds() != 60 || e.EffectRetention.Hours() != 30*24 || e.CrossRegion != CrossRegionReconciled ||
		len(e.Webhook.Allow) != 2 || !e.Webhook.AllowLoopback || e.Idem.Table != "i" || !e.Transactional || e.MetricsNamespace != "idemkit" ||
		e.StreamMaxRetries != 3 {
		t.Fatalf("%+v %v", e, err)
	}
	if err := e.Require(EnvRunsTable, "IDEMPOTENCY_TABLE"); err != nil {
		t.Fatal(err)
	}
	if err := e.Require(EnvEffectsTable, EnvAPIKeysTable); err == nil || !strings.Contains(err.Error(), EnvAPIKeysTable) {
		t.Fatal(err)
	}
	if d, _ := LoadEnv(func(string) string { return "" }); d.StreamMaxRetries != 10 {
		t.Fatalf("default StreamMaxRetries %d, want the template's 10", d.StreamMaxRetries)
	}
	bad := map[string]string{EnvEffectLease: "0", EnvEffectRetention: "7", EnvCrossRegion: "strict", EnvWebhookLoopback: "maybe", "IDEMPOTENCY_PROCESSING_LEASE_SECONDS": "5",
		EnvStreamMaxRetries: "-1"}
	_, err = LoadEnv(func(k string) string { return bad[k] })
	for _, name := range []string{EnvEffectLease, EnvEffectRetention, EnvCrossRegion, EnvWebhookLoopback, "IDEMPOTENCY_PROCESSING_LEASE_SECONDS", EnvStreamMaxRetries} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s not reported: %v", name, err)
		}
	}
	if _, err := LoadEnv(func(k string) string { return map[string]string{EnvCrossRegion: "fenced-effects"}[k] }); err == nil {
		t.Fatal("fenced-effects without FENCE_TABLE accepted")
	}
}

func TestCapabilitiesDoc(t *testing.T) {
	if _, err := CapabilitiesDoc("strict"); err == nil {
		t.Fatal("bad posture accepted")
	}
	// multiRegion only under fenced-effects (Layer 1 home-pinned, effects
	// fenced): TestCapabilitiesPerConfiguration checks every posture.
	b, err := CapabilitiesDoc(CrossRegionFenced)
	if err != nil || !strings.Contains(string(b), `"crossRegion":"fenced-effects","multiRegion":{"partitionRecoveryStrategy":"x-host-idemkit-home-region-fence","replicationLagBoundMs":2000}`) {
		t.Fatal(string(b), err)
	}
	b, err = CapabilitiesDoc(CrossRegionReconciled)
	if err != nil || strings.Contains(string(b), "multiRegion") {
		t.Fatal(string(b), err)
	}
}

func TestFromLambda(t *testing.T) {
	rec := events.DynamoDBEventRecord{EventID: "1", EventName: "REMOVE", UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: TTLPrincipal},
		Change: events.DynamoDBStreamRecord{OldImage: map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute("x"), "n": events.NewNumberAttribute("3"), "b": events.NewBooleanAttribute(true),
			"l":   events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"s": events.NewStringAttribute("escaped")})}),
			"bin": events.NewBinaryAttribute([]byte{1}), "null": events.NewNullAttribute(), "ss": events.NewStringSetAttribute([]string{"a"}),
		}}}
	sr, err := FromLambda(rec)
	if err != nil || !sr.TTLDeletion() {
		t.Fatal(sr, err)
	}
	l := sr.OldImage["l"].(*types.AttributeValueMemberL).Value[0].(*types.AttributeValueMemberM).Value["s"].(*types.AttributeValueMemberS)
	if l.Value != "escaped" || sr.OldImage["n"].(*types.AttributeValueMemberN).Value != "3" {
		t.Fatal(sr.OldImage)
	}
}

func TestMemStores(t *testing.T) {
	ctx := context.Background()
	k := NewMemKeys()
	if err := k.PutKey(ctx, "secret", "acme"); err != nil {
		t.Fatal(err)
	}
	if err := k.PutKey(ctx, "secret", "globex"); !errors.Is(err, ErrKeyExists) {
		t.Fatal(err)
	}
	if ten, ok, _ := k.Tenant(ctx, HashKey("secret")); !ok || ten != "acme" {
		t.Fatal(ten, ok)
	}
	if _, ok, _ := k.Tenant(ctx, HashKey("other")); ok {
		t.Fatal("unknown key resolved")
	}
	k1, k2 := NewAPIKey(), NewAPIKey()
	if !strings.HasPrefix(k1, "idk_") || len(k1) != 36 || k1 == k2 {
		t.Fatal("NewAPIKey")
	}
}

// TestRecipeStamps: a new run carries the kit's current recipe stamps
// (RFC 0150 §E), a run without them is never stored, and the webhook
// effect's identity is derived under the run's OWN stamp: a run stamped with
// another recipe (a v1 history) gets ErrUnsupportedRecipe, never a v2
// identity computed in its place.
func TestRecipeStamps(t *testing.T) {
	ctx := context.Background()
	r := NewRun("acme", WorkflowWebhook, []byte(`{"url":"https://example.com/"}`), time.Now())
	if r.RecipeStamps != ledger.CurrentRecipes() || r.ActivityIdentityRecipe != "openwop-activity-v2" ||
		r.SemanticRequestRecipe != "openwop-semantic-request-v2" || r.Status != StatusPending || RunTenant(r.ID) != "acme" {
		t.Fatalf("%+v", r)
	}
	// The JSON form carries the two stamps as run record members.
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"activityIdentityRecipe":"openwop-activity-v2"`) ||
		!strings.Contains(string(b), `"semanticRequestRecipe":"openwop-semantic-request-v2"`) {
		t.Fatal(string(b))
	}
	m := NewMemRuns()
	for _, bad := range []Run{
		func() Run { x := r; x.RecipeStamps = ledger.RecipeStamps{}; return x }(),
		func() Run { x := r; x.SemanticRequestRecipe = ""; return x }(),
	} {
		if err := m.Create(ctx, bad); !errors.Is(err, ledger.ErrUnsupportedRecipe) {
			t.Fatalf("unstamped run stored: %v", err)
		}
	}
	if err := m.Create(ctx, Run{ID: "globex/abcdefghijklmnopqr", Tenant: "acme", RecipeStamps: ledger.CurrentRecipes()}); err == nil {
		t.Fatal("a runId of another tenant was stored")
	}
	if m.Len() != 0 {
		t.Fatalf("%d runs stored", m.Len())
	}
	if err := m.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Get(ctx, r.ID)
	id, err := WebhookIdentity(got)
	want, _ := ledger.ActivityIdentity(ledger.Activity{Tenant: "acme", RunID: r.ID, NodeID: NodeDeliver, Ordinal: 0, Provider: WebhookProvider})
	if err != nil || id != want || id.Recipe != ledger.ActivityIdentityRecipe {
		t.Fatalf("%+v %v, want %+v", id, err, want)
	}
	for _, stamp := range []string{"openwop-activity-v1", ""} {
		old := got
		old.ActivityIdentityRecipe = stamp
		if id, err := WebhookIdentity(old); !errors.Is(err, ledger.ErrUnsupportedRecipe) || id.EffectID != "" {
			t.Fatalf("stamp %q: %+v %v", stamp, id, err)
		}
	}
	// A stream image / item round trip keeps the stamps.
	back, ok := RunFromItem(runItem(got))
	if !ok || back.RecipeStamps != got.RecipeStamps {
		t.Fatalf("%+v", back)
	}
}
