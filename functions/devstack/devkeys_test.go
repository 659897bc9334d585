package devstack

import (
	"context"
	"testing"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestDevDemoKeysCarryPolicyAttributes: the demo keys idemkit dev mints
// carry every credential attribute the shipped policies scope keys by (the
// commerce policy's namespace and worker, the ERP policy's client, company
// and organisation), stored with the key so the authorizer passes them on.
func TestDevDemoKeysCarryPolicyAttributes(t *testing.T) {
	c := demoCredential("demo-a")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(append([]string{}, commerce.Policy.Scope.Credential...), erp.Policy.Scope.Credential...) {
		if c.Attrs[n] == "" {
			t.Errorf("demo key lacks %s", n)
		}
	}
	keys := apikeys.NewMemKeys()
	if err := putDevKey(context.Background(), keys, "k", c); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := keys.Credential(context.Background(), apikeys.HashKey("k")); !ok || len(got.Attrs) != len(c.Attrs) {
		t.Fatalf("stored %+v", got)
	}
}
