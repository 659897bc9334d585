package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// getCapabilities serves GET /.well-known/openwop from the API handler of a
// deployment configured with CROSS_REGION=cross (and FENCE_TABLE when
// fenced), as the api function's main wires it.
func getCapabilities(t *testing.T, cross string) []byte {
	t.Helper()
	env, err := host.LoadEnv(func(k string) string {
		return map[string]string{host.EnvCrossRegion: cross, host.EnvFenceTable: "fence", host.EnvFenceTableRegion: "eu-west-1"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	g, err := idem.New(idem.Config{Store: idemmem.New(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := apifn.New(apifn.Config{Runs: host.NewMemRuns(), Guard: g, Ledger: l, CrossRegion: env.CrossRegion, Logger: logger})
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

// Each of the three configurations advertises its posture as
// idempotency.crossRegion, and none advertises the behavioural multiRegion
// facet (nor replicationLagBoundMs / partitionRecoveryStrategy, which live
// in it): Layer 1 on an MREC table does not resolve a replay within the
// replication lag or during a partition (TestLayer1ReplayWithinLagStartsNewWork
// in internal/regionsim), and under reconciled-records Layer 2 is
// at-least-once-risk. The advertisement is identical on every request of a
// deployment.
func TestCapabilitiesPerConfiguration(t *testing.T) {
	allowed := map[string]bool{"status": true, "since": true, "witness": true, "until": true, "multiRegion": true, "crossRegion": true}
	for _, cross := range []string{host.CrossRegionSingle, host.CrossRegionReconciled, host.CrossRegionFenced} {
		body := getCapabilities(t, cross)
		var doc struct {
			Idempotency map[string]any `json:"idempotency"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range doc.Idempotency {
			if !allowed[k] {
				t.Errorf("%s: idempotency.%s is not in the v2 capabilities schema", cross, k)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if doc.Idempotency["crossRegion"] != cross || doc.Idempotency["status"] != "supported" {
			t.Fatalf("%s: idempotency %v", cross, doc.Idempotency)
		}
		for _, claim := range []string{"multiRegion", "replicationLagBoundMs", "partitionRecoveryStrategy"} {
			if strings.Contains(string(body), claim) {
				t.Fatalf("%s advertises %s: %s", cross, claim, body)
			}
		}
		if again := getCapabilities(t, cross); !bytes.Equal(again, body) {
			t.Fatalf("%s: advertisement changed between requests:\n%s\n%s", cross, body, again)
		}
		t.Logf("%s: idempotency keys %v", cross, keys)
	}
	// Vocabulary RFC 0150 removed, or never had, is refused at start-up.
	for _, bad := range []string{"strict", "last-writer-wins", "first-writer-wins", "multi-region", "FENCED-EFFECTS"} {
		if _, err := host.CapabilitiesDoc(bad); err == nil {
			t.Errorf("CapabilitiesDoc(%q) accepted", bad)
		}
		if _, err := host.LoadEnv(func(k string) string { return map[string]string{host.EnvCrossRegion: bad}[k] }); err == nil {
			t.Errorf("CROSS_REGION=%q accepted", bad)
		}
	}
}
