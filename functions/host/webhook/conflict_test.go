package webhook

import (
	"slices"
	"testing"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/apierr"
)

// TestConflictCodesFollowThePolicies holds the 409 codes the webhook reads
// to the codes idemkit's own policies answer and the client retries: a
// receiver built on idemkit (any policy) is told apart correctly.
func TestConflictCodesFollowThePolicies(t *testing.T) {
	for _, c := range client.DefaultInFlightCodes {
		if !slices.Contains(inFlightCodes, c) {
			t.Errorf("the client retries 409 %s; the webhook does not read it as in flight", c)
		}
	}
	for _, c := range []string{apierr.CodeIdempotencyInFlight, erp.CodeRequestInProgress} {
		if !keyInFlight(c, false) {
			t.Errorf("409 %s is not read as in flight", c)
		}
	}
	for _, c := range []string{apierr.CodeIdempotencyKeyMismatch, erp.CodeKeyConflict, commerce.CodeIdempotencyMismatch} {
		if keyInFlight(c, true) {
			t.Errorf("409 %s with Retry-After is read as in flight; a mismatch is final", c)
		}
	}
	if keyInFlight("", false) || keyInFlight(apierr.CodeRunTerminal, false) || !keyInFlight(apierr.CodeRunAlreadyActive, true) {
		t.Error("a 409 without an in-flight code is in flight exactly when it carries Retry-After")
	}
}
