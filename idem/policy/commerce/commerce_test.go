package commerce_test

import (
	"fmt"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// TestRegisteredWhenImported: importing the package makes the commerce
// policy nameable (IDEMPOTENCY_POLICY=commerce), and the name gives this
// package's Policy.
func TestRegisteredWhenImported(t *testing.T) {
	p, err := idem.PolicyNamed("Commerce")
	if err != nil || p.Name != commerce.Policy.Name || p.Key.Name != commerce.Key.Name || p.Retention != idem.Forever {
		t.Fatalf("PolicyNamed(commerce) = %q %q %s, %v; want commerce.Policy", p.Name, p.Key.Name, p.Retention, err)
	}
}

// The commerce policy answers a reused key with a different operation or
// input in its own code, naming the registry code it stands for; it
// forgets a request rejected at the door and replays every other outcome.
func Example() {
	body := commerce.Policy.ErrorBody(idem.ErrorInfo{Status: 409, Code: "idempotency_key_mismatch", Message: "mismatch"})
	fmt.Println(string(body))
	fmt.Println(commerce.Policy.Cache(429, "") == idem.Forget, commerce.Policy.Cache(500, "") == idem.Replay)
	// Output:
	// {"error":"idempotency-mismatch","message":"mismatch","details":{"openwopCode":"idempotency_key_mismatch"}}
	// true true
}
