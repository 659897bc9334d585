package kit_test

import (
	"github.com/idemkit/idemkit/idem/idemenv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/workorder"
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

// The live work-order route decodes its body with the work-order contract
// under every policy (equal JSON and XML work orders share one hash), but
// renders answers per Accept only under the ERP policy, whose contract
// that is. Under the OpenWOP and commerce policies a replay is the first
// answer byte for byte: a JSON original is never replayed as XML because
// the retry asked for XML.
func TestWorkOrderRenderingIsTheERPPolicys(t *testing.T) {
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	for _, set := range []string{"openwop", "commerce", "erp"} {
		env, err := settings.LoadEnv(settings.Values(map[string]string{idemenv.Table: "I", idemenv.Policy: set}))
		if err != nil {
			t.Fatal(err)
		}
		k, err := kit.NewKit(kit.Config{Env: env, Client: c, Parts: kit.Parts{Guard: true}})
		if err != nil {
			t.Fatal(err)
		}
		r, ok := k.Guard.Config().Routes[workorder.RouteLive]
		if !ok || r.Contract == nil || r.Contract.Decode == nil {
			t.Fatalf("%s: the live work-order route has no contract", set)
		}
		if got, want := r.Contract.Render != nil, set == "erp"; got != want {
			t.Errorf("%s: the live work-order route renders per Accept: %t, want %t", set, got, want)
		}
	}
}
