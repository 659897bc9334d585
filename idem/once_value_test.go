package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// Guard.Once replays the value Run returned, byte for byte, under every
// policy: the ERP policy's request_id stamp is for HTTP answers, so a
// value with a top-level "request_id" member keeps its own.
func TestOnceReplaysTheValueUnchanged(t *testing.T) {
	g, err := idem.New(idem.Config{Store: newEnv(t, nil).store, Policy: erp.Policy, Tenant: idem.SingleTenant("erp")})
	if err != nil {
		t.Fatal(err)
	}
	invocation := func(id string) context.Context {
		ctx, cancel := context.WithTimeout(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id}), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	const value = `{"request_id":"upstream-123","charged":5}`
	w := idem.Work{Operation: "charge", Key: "k-1", Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
		return []byte(value), nil
	}}
	first, ran, err := g.Once(invocation("inv-1"), w)
	if err != nil || !ran || string(first) != value {
		t.Fatalf("first: %s %v %v", first, ran, err)
	}
	again, ran, err := g.Once(invocation("inv-2"), w)
	if err != nil || ran || string(again) != value {
		t.Fatalf("replay: %s (ran %v, %v); want %s", again, ran, err, value)
	}
}
