package canon_test

import (
	"fmt"
	"testing"

	"github.com/idemkit/idemkit/idem/canon"
)

// Default hashes the contract version and the request only: the scope
// separates records already.
func ExampleDefault() {
	b, err := canon.Default(canon.Request{
		Request:         map[string]any{"qty": 2, "sku": "A-1"},
		ContractVersion: "v1",
		Scope:           canon.Scope{Tenant: "acme", Method: "POST", Operation: "POST /orders"},
	})
	fmt.Println(string(b), err)
	// Output:
	// {"contract_version":"v1","request":{"qty":2,"sku":"A-1"}} <nil>
}

// A Normalizer's Name is stamped into the recipe, so it must be a recipe
// word.
func TestNormalizerValidate(t *testing.T) {
	for name, ok := range map[string]bool{"": false, "erp-v1": true, "a.b_c": true, "bad name": false, "x+y": false} {
		if err := (&canon.Normalizer{Name: name}).Validate(); (err == nil) != ok {
			t.Errorf("Validate(%q) = %v", name, err)
		}
	}
}

// Marshal refuses a number whose canonical form would change its value.
func TestMarshalExact(t *testing.T) {
	if _, err := canon.Marshal(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := canon.Marshal(map[string]any{"n": uint64(1<<63 + 1)}); err == nil {
		t.Fatal("an inexact number was accepted")
	}
}
