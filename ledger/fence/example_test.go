package fence_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencemem "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// Two regions whose effects-table replicas cannot see each other (an MREC
// partition) both claim the same refund. With one fence owner in the home
// region, only one of them reaches the provider.
func Example() {
	fences := fencemem.New() // in production: fence/dynamostore on the home region's FenceTable
	calls := 0
	refund := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		calls++ // the provider would receive c.ProviderKey as Idempotency-Key
		return []byte("re_123"), nil
	}
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-42"})
	for _, region := range []string{"eu-west-1", "us-east-1"} {
		owner, _ := fence.New(fence.Config{Store: fences, Region: region})
		l, _ := ledger.New(ledger.Config{Store: memstore.New(), Fencer: owner, Wait: -1})
		res, err := l.Do(context.Background(), ledger.Effect{Identity: id}, owner.Guard(refund))
		var issued *fence.IssuedError
		switch {
		case err == nil:
			fmt.Printf("%s: fired, result %s\n", region, res.Value)
		case errors.As(err, &issued):
			fmt.Printf("%s: not fired, already issued in %s\n", region, issued.Region)
		default:
			fmt.Println(region, err)
		}
	}
	fmt.Println("provider calls:", calls)
	// Output:
	// eu-west-1: fired, result re_123
	// us-east-1: not fired, already issued in eu-west-1
	// provider calls: 1
}
