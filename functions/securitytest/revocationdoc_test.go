package securitytest

import (
	"os"
	"strings"
	"testing"
	"time"

	idemkit "github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/functions/host/settings"
)

// TestRevocationBoundNamesTheRequestsInFlight: SECURITY.md's bound on how
// long a revoked key keeps working is the HTTP API's ReauthorizeEvery
// (template.yaml) for a new request, and it says that a request admitted
// within it runs to its end: a long poll admitted in the last moment keeps
// reading the run's events for up to POLL_MAX_WAIT_SECONDS after it. Before,
// it said "and no longer" (RED_TEAM 325).
func TestRevocationBoundNamesTheRequestsInFlight(t *testing.T) {
	every, err := devstack.DeployedReauthorizeEvery()
	if err != nil {
		t.Fatal(err)
	}
	if every != 5*time.Minute {
		t.Fatalf("template.yaml's ReauthorizeEvery is %v; SECURITY.md says 5 minutes", every)
	}
	b, err := os.ReadFile("../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "- API Gateway caches the authorizer's decision")
	if !ok {
		t.Fatal("SECURITY.md has no bullet on the authorizer's kept decisions")
	}
	bullet, _, _ := strings.Cut(rest, "\n- ")
	bullet = strings.Join(strings.Fields(bullet), " ")
	for _, want := range []string{"up to 5 minutes", "a request admitted within them runs to its end", "`" + settings.EnvPollMaxWait + "`"} {
		if !strings.Contains(bullet, want) {
			t.Errorf("SECURITY.md's revocation bound does not say %q:\n%s", want, bullet)
		}
	}
	if strings.Contains(bullet, "no longer") {
		t.Errorf("SECURITY.md's revocation bound says \"no longer\", which a long poll admitted within it outlives:\n%s", bullet)
	}
}

// TestSecurityLimitsStateTheSharedThrottle: template.yaml throttles the
// HTTP API's stage (ApiThrottleRateLimit, ApiThrottleBurstLimit), one
// budget for every tenant; SECURITY.md's known limits say so, and no
// longer that no throttling is configured (RED_TEAM 326).
func TestSecurityLimitsStateTheSharedThrottle(t *testing.T) {
	tpl := string(idemkit.Template)
	for _, want := range []string{"ThrottlingRateLimit: !Ref ApiThrottleRateLimit", "ThrottlingBurstLimit: !Ref ApiThrottleBurstLimit"} {
		if !strings.Contains(tpl, want) {
			t.Fatalf("template.yaml has no %q: this test's premise is gone", want)
		}
	}
	b, err := os.ReadFile("../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	if strings.Contains(doc, "No throttling is configured") {
		t.Error("SECURITY.md says no throttling is configured on the HTTP API; the template throttles its stage")
	}
	for _, want := range []string{"`ApiThrottleRateLimit`", "`ApiReservedConcurrency`", "one budget for every tenant", "no quota per tenant"} {
		if !strings.Contains(doc, want) {
			t.Errorf("SECURITY.md's known limits do not say %q", want)
		}
	}
}
