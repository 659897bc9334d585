package identity_test

import (
	"fmt"

	"github.com/idemkit/idemkit/ledger/identity"
)

// The two keying modes: a business identity (the rule) and the activity
// recipe v2 (the fallback). Both are tenant-bound and never include the
// attempt; the provider receives a derivative key.
func Example() {
	b, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-123/refund-1"})
	fmt.Println(b.Keying, b.Recipe)
	fmt.Println(b.EffectID)
	fmt.Println(b.ProviderKey)

	a, _ := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: "acme/run-0000000000000001", NodeID: "charge", Ordinal: 0, Provider: "stripe"})
	fmt.Println(a.Keying, a.Recipe)
	fmt.Println(a.EffectID)
	fmt.Println(a.ProviderKey)
	// Output:
	// business-identity idemkit-business-v1
	// acme/pGIYPHL1HJFO3JoC7eS89ekYztypzqLTm5B8qlEFsv4
	// idemkit-tgau-1poQfZn5YXVBf-5i4UUw8medFxVqaumzAn9vA8
	// activity-recipe openwop-activity-v2
	// acme/tZtGV4rSkZzPlZtCAmu-BbhLM6wtGrbMGwlo7Mlco74
	// idemkit-8M_4P8hhB-_Og4OvPmDJcgYeucFl2hN9NjwmzFNRtqg
}
