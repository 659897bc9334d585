package erp_test

import (
	"fmt"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestRegisteredWhenImported: importing the package makes the ERP policy
// nameable (IDEMPOTENCY_POLICY=erp), and the name gives this package's
// Policy.
func TestRegisteredWhenImported(t *testing.T) {
	p, err := idem.PolicyNamed(" ERP ")
	if err != nil || p.Name != erp.Policy.Name || p.Key.Name != erp.Key.Name || p.Retention != erp.Policy.Retention {
		t.Fatalf("PolicyNamed(erp) = %q %q %s, %v; want erp.Policy", p.Name, p.Key.Name, p.Retention, err)
	}
}

// The ERP policy answers a reused key with a different payload in its own
// code and prescribed text, with the current attempt's request id.
func Example() {
	body := erp.Policy.ErrorBody(idem.ErrorInfo{Status: 409, Code: "idempotency_key_mismatch", Message: "mismatch", RequestID: "req-1"})
	fmt.Println(string(body))
	fmt.Println(erp.Policy.Name, erp.Policy.Retention, erp.Key.MinLen, erp.Key.MaxLen)
	// Output:
	// {"error":"IDEMPOTENCY_KEY_CONFLICT","message":"The Idempotency-Key has already been used with a different request payload.","request_id":"req-1"}
	// erp 720h0m0s 8 128
}
