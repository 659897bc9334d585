package kit_test

import (
	"github.com/idemkit/idemkit/idem/idemenv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
)

// The policy IDEMPOTENCY_POLICY names reaches Layer 1 (idem.Config.Policy)
// through NewKit, the wiring the api function and `idemkit dev` share;
// unset, Layer 1 runs the OpenWOP policy.
func TestNewKitPolicyFromEnv(t *testing.T) {
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	for set, want := range map[string]string{"": "openwop", "openwop": "openwop", "commerce": "commerce", "erp": "erp"} {
		env, err := settings.LoadEnv(settings.Values(map[string]string{idemenv.Table: "I", idemenv.Policy: set}))
		if err != nil {
			t.Fatal(err)
		}
		k, err := kit.NewKit(kit.Config{Env: env, Client: c, Parts: kit.Parts{Guard: true}})
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Guard.Config().Policy.Name; got != want {
			t.Errorf("IDEMPOTENCY_POLICY=%q: Layer 1 runs %q, want %q", set, got, want)
		}
	}
}
