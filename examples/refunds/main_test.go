package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestMain deselects the README's by-hand TestTryCrash when no
// DYNAMODB_ENDPOINT is given (it would only skip): in the repository the
// same function runs on every test emulator through TestTryCrashOnEmulators.
func TestMain(m *testing.M) {
	testutil.DeselectByHand("TestTryCrash")
	dynamotest.Main(m)
}

// The deploy guide's worker on every test emulator: a batch delivered
// twice, with a second message for an order already refunded, calls the
// provider once per order and reports no failure.
func TestWorkerRefundsEachOrderOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		t.Setenv("DYNAMODB_ENDPOINT", e.Endpoint)
		t.Setenv("EFFECTS_TABLE", e.CreateTable(t, "EffectsTable"))
		t.Setenv("EFFECT_LEASE_SECONDS", "60")
		t.Setenv("AWS_REGION", e.Region)
		t.Setenv("AWS_ACCESS_KEY_ID", "idemkit")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "idemkit")
		ctx := context.Background()
		l, err := newLedger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		order := fmt.Sprintf("order-%d", time.Now().UnixNano())
		batch := events.SQSEvent{Records: []events.SQSMessage{
			{MessageId: "m-1", Body: `{"tenant":"acme","order":"` + order + `-a","amount":5}`},
			{MessageId: "m-2", Body: `{"tenant":"acme","order":"` + order + `-b","amount":7}`},
			{MessageId: "m-3", Body: `{"tenant":"acme","order":"` + order + `-a","amount":5}`},
		}}
		before := refunds.Load()
		for range 2 { // the second delivery is SQS redelivering the batch
			if resp := handle(ctx, l, "acme", batch); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures: %v", resp.BatchItemFailures)
			}
		}
		if n := refunds.Load() - before; n != 2 {
			t.Fatalf("the provider was called %d times for 2 orders", n)
		}
	})
}

// A bad value of EFFECT_LEASE_SECONDS stops start-up naming the variable:
// not whole seconds, below one second, or above the hour the reference
// host accepts (a count of seconds large enough to wrap the lease's
// duration to a short or negative one included).
func TestWorkerRejectsABadLease(t *testing.T) {
	t.Setenv("EFFECTS_TABLE", "effects")
	t.Setenv("AWS_REGION", "us-east-1")
	for _, v := range []string{"1m", "0", "-5", "3601", "9223372037", "18446744074"} {
		t.Setenv("EFFECT_LEASE_SECONDS", v)
		if _, err := newLedger(context.Background()); err == nil || !strings.Contains(err.Error(), "EFFECT_LEASE_SECONDS") {
			t.Fatalf("EFFECT_LEASE_SECONDS=%s: err = %v", v, err)
		}
	}
	t.Setenv("EFFECT_LEASE_SECONDS", "3600")
	if _, err := newLedger(context.Background()); err != nil {
		t.Fatalf("EFFECT_LEASE_SECONDS=3600: %v", err)
	}
}

// The README's TestTryCrash on every test emulator, with a one-second lease
// so the crashed claim expires within the redelivery's wait.
func TestTryCrashOnEmulators(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		t.Setenv("DYNAMODB_ENDPOINT", e.Endpoint)
		t.Setenv("EFFECTS_TABLE", e.CreateTable(t, "EffectsTable"))
		t.Setenv("EFFECT_LEASE_SECONDS", "1")
		t.Setenv("AWS_REGION", e.Region)
		t.Setenv("AWS_ACCESS_KEY_ID", "idemkit")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "idemkit")
		TestTryCrash(t)
	})
}
