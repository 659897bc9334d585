package settings_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// getCapabilities serves GET /.well-known/openwop from the API handler of a
// deployment configured with CROSS_REGION=cross (and FENCE_TABLE when
// fenced), as the api function's main wires it.
func getCapabilities(t *testing.T, cross string, extraEnv ...string) []byte {
	t.Helper()
	vars := map[string]string{settings.EnvCrossRegion: cross, settings.EnvFenceTable: "fence", settings.EnvFenceTableRegion: "eu-west-1"}
	for i := 0; i+1 < len(extraEnv); i += 2 {
		vars[extraEnv[i]] = extraEnv[i+1]
	}
	env, err := settings.LoadEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	// The api function's main builds its Config with apifn.ConfigFromKit.
	h, err := apifn.New(apifn.ConfigFromKit(&kit.Kit{Env: env, Runs: runs.NewMemRuns(), Guard: g, Ledger: l, Logger: logger}))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	ev.RawPath = "/.well-known/openwop"
	ev.RequestContext.HTTP.Method = http.MethodGet
	ev.RequestContext.HTTP.Path = ev.RawPath
	resp, err := h.Handle(context.Background(), ev)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s %v", cross, resp.StatusCode, resp.Body, err)
	}
	return []byte(resp.Body)
}

// capsSchema is the closed v2 discovery schema (capabilities.schema.json, via
// the OpenAPI document's getCapabilities 200), from ../shared/openwop.
func capsSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, _, err := wireschema.Load(t).Response(http.MethodGet, "/.well-known/openwop", http.StatusOK)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// idempotencyFamily returns the idempotency member of a capabilities body,
// after checking the whole body against the real discovery schema.
func idempotencyFamily(t *testing.T, sch *jsonschema.Schema, body []byte) map[string]any {
	t.Helper()
	if err := wireschema.Validate(sch, body); err != nil {
		t.Fatalf("capabilities document does not match the v2 schema: %v\n%s", err, body)
	}
	var doc struct {
		Idempotency map[string]any `json:"idempotency"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Idempotency
}

// The real schema is not vacuous: it refuses what it must, including the
// vocabulary earlier versions of this host served (status "supported", a
// root "host" object).
func TestIdempotencyFamilySchemaRefuses(t *testing.T) {
	sch := capsSchema(t)
	root := `{"protocolVersions":["2.21"],"preferredVersion":"2.21",%s"idempotency":%s}`
	base := `"status":"stable","since":"2.21","witness":"witnessable-gated"`
	if err := wireschema.Validate(sch, []byte(fmt.Sprintf(root, "", `{`+base+`}`))); err != nil {
		t.Fatalf("minimal document refused: %v", err)
	}
	for _, bad := range []string{
		fmt.Sprintf(root, `"host":{"name":"idemkit"},`, `{`+base+`}`),
		fmt.Sprintf(root, "", `{"status":"supported","since":"2.0","witness":"witnessable-gated"}`),
		fmt.Sprintf(root, "", `{"status":"experimental","since":"2.21","witness":"witnessable-gated"}`),
		fmt.Sprintf(root, "", `{`+base+`,"crossRegion":"strict"}`),
		fmt.Sprintf(root, "", `{`+base+`,"crossRegion":"single-region","extra":1}`),
		fmt.Sprintf(root, "", `{`+base+`,"multiRegion":{"replicationLagBoundMs":60001,"partitionRecoveryStrategy":"lexicographic-min-run-id"}}`),
		fmt.Sprintf(root, "", `{`+base+`,"multiRegion":{"replicationLagBoundMs":-1,"partitionRecoveryStrategy":"lexicographic-min-run-id"}}`),
		fmt.Sprintf(root, "", `{`+base+`,"multiRegion":{"replicationLagBoundMs":10,"partitionRecoveryStrategy":"last-writer-wins"}}`),
		fmt.Sprintf(root, "", `{`+base+`,"multiRegion":{"replicationLagBoundMs":10,"partitionRecoveryStrategy":"x-host-idemkit"}}`),
		fmt.Sprintf(root, "", `{`+base+`,"multiRegion":{"replicationLagBoundMs":10,"partitionRecoveryStrategy":"lexicographic-min-run-id","supported":true}}`),
		fmt.Sprintf(root, "", `{"since":"2.21","witness":"witnessable-gated"}`),
		fmt.Sprintf(root, `"conformance":{"seamsProfile":"openwop-conformance-seams-v1"},`, `{`+base+`}`),
	} {
		if wireschema.Validate(sch, []byte(bad)) == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}

// Each of the three configurations, served by the API handler, advertises
// exactly what docs/MULTI_REGION.md says, matching the v2 schema's
// idempotency family, identically on every request:
//   - single-region: crossRegion only;
//   - reconciled-records: crossRegion only — no multiRegion, because Layer 2
//     is at-least-once-risk across regions and Layer 1 on the local MREC
//     replica starts new work within the lag
//     (TestLayer1ReplayWithinLagStartsNewWork in internal/regionsim);
//   - fenced-effects: crossRegion and multiRegion {replicationLagBoundMs,
//     partitionRecoveryStrategy "x-host-idemkit-home-region-fence"}, because
//     effects are fenced and Layer 1 is pinned to the home region
//     (TestLayer1HomePinnedReplayWithinLag, TestLayer1HomePinnedPartitionFailsClosed).
func TestCapabilitiesPerConfiguration(t *testing.T) {
	sch := capsSchema(t)
	base := map[string]any{"status": "stable", "since": settings.ProtocolVersion, "witness": "witnessable-gated"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	want := map[string]map[string]any{
		settings.CrossRegionSingle:     with(map[string]any{"crossRegion": "single-region"}),
		settings.CrossRegionReconciled: with(map[string]any{"crossRegion": "reconciled-records"}),
		settings.CrossRegionFenced: with(map[string]any{"crossRegion": "fenced-effects", "multiRegion": map[string]any{
			"replicationLagBoundMs":     float64(settings.DefaultReplicationLagBoundMs),
			"partitionRecoveryStrategy": "x-host-idemkit-home-region-fence",
		}}),
	}
	for _, cross := range []string{settings.CrossRegionSingle, settings.CrossRegionReconciled, settings.CrossRegionFenced} {
		body := getCapabilities(t, cross)
		got := idempotencyFamily(t, sch, body)
		if !reflect.DeepEqual(got, want[cross]) {
			t.Fatalf("%s: idempotency =\n %v\nwant\n %v", cross, got, want[cross])
		}
		for range 3 {
			if again := getCapabilities(t, cross); !bytes.Equal(again, body) {
				t.Fatalf("%s: advertisement changed between requests:\n%s\n%s", cross, body, again)
			}
		}
		if cross != settings.CrossRegionFenced {
			for _, claim := range []string{"multiRegion", "replicationLagBoundMs", "partitionRecoveryStrategy"} {
				if strings.Contains(string(body), claim) {
					t.Fatalf("%s advertises %s: %s", cross, claim, body)
				}
			}
		}
	}
	// Vocabulary RFC 0150 removed, or never had, is refused at start-up.
	for _, bad := range []string{"strict", "last-writer-wins", "first-writer-wins", "multi-region", "FENCED-EFFECTS"} {
		if _, err := settings.CapabilitiesDoc(bad); err == nil {
			t.Errorf("CapabilitiesDoc(%q) accepted", bad)
		}
		if _, err := settings.LoadEnv(func(k string) string { return map[string]string{settings.EnvCrossRegion: bad}[k] }); err == nil {
			t.Errorf("CROSS_REGION=%q accepted", bad)
		}
	}
}

// The lag bound comes from REPLICATION_LAG_BOUND_MS (template parameter
// ReplicationLagBoundMs), is advertised only under fenced-effects, and is
// refused outside 0..60000 both at LoadEnv and by CapabilitiesDoc.
func TestCapabilitiesReplicationLagBound(t *testing.T) {
	sch := capsSchema(t)
	for _, tc := range []struct {
		cross, bound string
		want         float64 // -1: no multiRegion
	}{
		{settings.CrossRegionFenced, "", settings.DefaultReplicationLagBoundMs},
		{settings.CrossRegionFenced, "0", 0},
		{settings.CrossRegionFenced, " 5000 ", 5000},
		{settings.CrossRegionFenced, "60000", 60000},
		{settings.CrossRegionReconciled, "5000", -1},
		{settings.CrossRegionSingle, "5000", -1},
	} {
		env, err := settings.LoadEnv(func(k string) string {
			return map[string]string{settings.EnvCrossRegion: tc.cross, settings.EnvFenceTable: "fence", settings.EnvFenceTableRegion: "eu-west-1", settings.EnvReplicationLagBound: tc.bound}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		body, err := env.CapabilitiesDoc()
		if err != nil {
			t.Fatal(err)
		}
		fam := idempotencyFamily(t, sch, body)
		mr, ok := fam["multiRegion"].(map[string]any)
		switch {
		case tc.want < 0 && ok:
			t.Fatalf("%s advertises multiRegion: %s", tc.cross, body)
		case tc.want >= 0 && (!ok || mr["replicationLagBoundMs"] != tc.want):
			t.Fatalf("%s %q: %s, want replicationLagBoundMs %v", tc.cross, tc.bound, body, tc.want)
		}
	}
	for _, bad := range []string{"-1", "60001", "2s", "1.5"} {
		_, err := settings.LoadEnv(func(k string) string { return map[string]string{settings.EnvReplicationLagBound: bad}[k] })
		if err == nil || !strings.Contains(err.Error(), settings.EnvReplicationLagBound) {
			t.Errorf("%s=%q: %v", settings.EnvReplicationLagBound, bad, err)
		}
	}
	for _, bad := range []int{-1, 60001} {
		if _, err := settings.CapabilitiesDoc(settings.CrossRegionFenced, settings.WithReplicationLagBound(bad)); err == nil {
			t.Errorf("CapabilitiesDoc accepted replicationLagBoundMs %d", bad)
		}
	}
}

func ExampleCapabilitiesDoc() {
	for _, cross := range []string{settings.CrossRegionSingle, settings.CrossRegionReconciled, settings.CrossRegionFenced} {
		b, err := settings.CapabilitiesDoc(cross, settings.WithReplicationLagBound(1500))
		if err != nil {
			panic(err)
		}
		var doc struct {
			Idempotency json.RawMessage `json:"idempotency"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			panic(err)
		}
		fmt.Println(string(doc.Idempotency))
	}
	// Output:
	// {"crossRegion":"single-region","since":"2.21","status":"stable","witness":"witnessable-gated"}
	// {"crossRegion":"reconciled-records","since":"2.21","status":"stable","witness":"witnessable-gated"}
	// {"crossRegion":"fenced-effects","multiRegion":{"partitionRecoveryStrategy":"x-host-idemkit-home-region-fence","replicationLagBoundMs":1500},"since":"2.21","status":"stable","witness":"witnessable-gated"}
}

// The deployment's declared lag bound (template parameter ReplicationLagBoundMs
// -> REPLICATION_LAG_BOUND_MS) is what the api function advertises.
// A declared bound of 0 (the template allows 0..60000) is advertised as 0,
// not replaced by the default (RED_TEAM 503).
func TestCapabilitiesAdvertiseConfiguredLagBound(t *testing.T) {
	for _, bound := range []string{"7000", "0", "1"} {
		body := getCapabilities(t, settings.CrossRegionFenced, "REPLICATION_LAG_BOUND_MS", bound)
		if !strings.Contains(string(body), `"replicationLagBoundMs":`+bound+`,`) && !strings.Contains(string(body), `"replicationLagBoundMs":`+bound+`}`) {
			t.Fatalf("configured lag bound %s not advertised: %s", bound, body)
		}
	}
}

// TestDiscoveryStatesSetCookieIsNeverCached: discovery's idemkit
// extension states the one deviation from "a replay is the status, headers
// and body of the first answer" — Set-Cookie is never stored nor replayed —
// with its reason, under every policy, and the document stays valid
// against the closed v2 discovery schema.
func TestDiscoveryStatesSetCookieIsNeverCached(t *testing.T) {
	sch := capsSchema(t)
	for _, policy := range idem.PolicyNames() {
		doc, err := settings.CapabilitiesDoc(settings.CrossRegionSingle, settings.WithIdempotencyPolicy(policy))
		if err != nil {
			t.Fatal(err)
		}
		idempotencyFamily(t, sch, doc)
		var d struct {
			Extensions map[string]map[string]any `json:"extensions"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		ext := d.Extensions[settings.ExtensionIdempotency]
		hs, _ := ext["replayOmitsHeaders"].([]any)
		reason, _ := ext["replayOmitsHeadersReason"].(string)
		if ext["policy"] != policy || len(hs) != 1 || hs[0] != "Set-Cookie" || !strings.Contains(reason, "cookie") {
			t.Fatalf("%s: extensions[%q] = %v", policy, settings.ExtensionIdempotency, ext)
		}
	}
}

// With IDEMPOTENCY_ENABLED=false the deployment's document (Env.CapabilitiesDoc)
// is the Layer-1-on one without the idempotency family and without
// extensions["idemkit.idempotency"], in every posture, and still valid
// against the closed v2 discovery schema.
func TestCapabilitiesLayer1Off(t *testing.T) {
	sch := capsSchema(t)
	for _, cross := range []string{settings.CrossRegionSingle, settings.CrossRegionReconciled, settings.CrossRegionFenced} {
		load := func(enabled string) map[string]any {
			t.Helper()
			vars := map[string]string{settings.EnvCrossRegion: cross, settings.EnvFenceTable: "fence",
				settings.EnvFenceTableRegion: "eu-west-1", "IDEMPOTENCY_ENABLED": enabled}
			env, err := settings.LoadEnv(func(k string) string { return vars[k] })
			if err != nil {
				t.Fatal(err)
			}
			body, err := env.CapabilitiesDoc()
			if err != nil {
				t.Fatal(err)
			}
			if err := wireschema.Validate(sch, body); err != nil {
				t.Fatalf("%s, IDEMPOTENCY_ENABLED=%s: %v\n%s", cross, enabled, err, body)
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		want, got := load("true"), load("false")
		if want["idempotency"] == nil {
			t.Fatalf("%s: Layer 1 on advertises no idempotency family: %v", cross, want)
		}
		delete(want, "idempotency")
		delete(want["extensions"].(map[string]any), settings.ExtensionIdempotency)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s, Layer 1 off:\n %v\nwant\n %v", cross, got, want)
		}
	}
}
