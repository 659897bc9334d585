package idem_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestScopeRefusalIsForgotten: under every preset policy a create refused
// because another run holds its scope (409 run_already_active) leaves no
// record, so the same Idempotency-Key later runs afresh; any other 409
// keeps the policy's disposition.
func TestScopeRefusalIsForgotten(t *testing.T) {
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, erp.Policy, commerce.Policy} {
		if d := p.Cache(409, "run_already_active"); d != idem.Forget {
			t.Errorf("%s: 409 run_already_active is %v, want Forget", p.Name, d)
		}
		if d := p.Cache(409, "run_terminal"); d != idem.Replay {
			t.Errorf("%s: 409 run_terminal is %v, want Replay", p.Name, d)
		}
	}
}

// TestRetriableRefusalIsForgotten: under the OpenWOP policy a 422 the error
// registry marks retriable (residency_unavailable: a region the host
// cannot honour now) leaves no record, so a later request with the key is
// decided afresh instead of replaying the refusal; a 422 the registry
// does not mark retriable is replayed.
func TestRetriableRefusalIsForgotten(t *testing.T) {
	if d := idem.PolicyOpenWOP.Cache(422, "residency_unavailable"); d != idem.Forget {
		t.Errorf("422 residency_unavailable is %v, want Forget", d)
	}
	if d := idem.PolicyOpenWOP.Cache(422, "capability_required"); d != idem.Replay {
		t.Errorf("422 capability_required is %v, want Replay", d)
	}
}
