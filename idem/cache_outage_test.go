package idem_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestStoreOutageIsNeverReplayed: under every preset policy a 503
// idemkit.store_unavailable (a host's store out of reach while the
// handler ran; the answer says to retry with the same key) leaves the
// record retryable, never a final outcome replayed to that retry, even
// under the commerce policy, which replays every other 5xx as a failed
// action.
func TestStoreOutageIsNeverReplayed(t *testing.T) {
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, erp.Policy, commerce.Policy} {
		if d := p.Cache(503, idem.CodeStoreUnavailable); d != idem.Retry {
			t.Errorf("%s: 503 %s is %v, want Retry", p.Name, idem.CodeStoreUnavailable, d)
		}
	}
	if d := commerce.Policy.Cache(503, "runner_unavailable"); d != idem.Replay {
		t.Errorf("commerce: another 503 is %v, want Replay (a failed action)", d)
	}
}
