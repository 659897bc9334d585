package main

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// TestEffectsResolveRecordLostThenFailedSaysItMayBeRecorded (RED_TEAM
// 443): `effects resolve --as delivered` whose record write landed with
// its answer lost, then was throttled until the SDK gave up, says the
// resolution may have been recorded and how to tell (the show: completed,
// it was; still escaped, the command to run again), exit 1; before it
// said only "DynamoDB PutItem failed: …", though the effect was
// completed. A read that fails so says nothing of a write. On the
// emulators.
func TestEffectsResolveRecordLostThenFailedSaysItMayBeRecorded(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		f := newFencedEscape(t, e, "order-record-lost-then-throttled")
		faults := dynamotest.NewFaults()
		faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		faults.FailNext("PutItem", 2, dynamotest.Throttle())
		setEndpointClientOptions(t, dynamotest.FastRetries, faults.Middleware())
		code, out, errb := f.cli("effects", "resolve", f.id.EffectID, "--as", "delivered")
		setEndpointClientOptions(t)
		if faults.Pending() != 0 {
			t.Fatalf("faults pending %d", faults.Pending())
		}
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || inLibrarysWords(errb) ||
			!strings.Contains(errb, "ProvisionedThroughputExceededException") || !strings.Contains(errb, "may have been recorded") ||
			!strings.Contains(errb, "idemkit effects show "+f.id.EffectID) || !strings.Contains(errb, "idemkit effects resolve "+f.id.EffectID+" --as delivered") {
			t.Fatalf("resolve: exit %d, stdout %q, stderr %q; want 1 and one line: may have been recorded, the show, the command again", code, out, errb)
		}
		if v, err := f.l.ShowEffect(ctx, f.id.EffectID); err != nil || v.State != ledger.EffectCompleted {
			t.Fatalf("after the lost answer: %v, %v; want completed (the lost write landed)", v.State, err)
		}

		g := newFencedEscape(t, e, "order-read-lost-then-throttled")
		faults = dynamotest.NewFaults()
		faults.FailNextAfterSend("GetItem", 1, dynamotest.ResponseLost())
		faults.FailNext("GetItem", 2, dynamotest.Throttle())
		setEndpointClientOptions(t, dynamotest.FastRetries, faults.Middleware())
		code, out, errb = g.cli("effects", "resolve", g.id.EffectID, "--as", "delivered")
		setEndpointClientOptions(t)
		if code != 1 || out != "" || strings.Contains(errb, "may have been recorded") || !strings.Contains(errb, "GetItem") {
			t.Fatalf("resolve, its read lost then throttled: exit %d, stdout %q, stderr %q; want 1, the read's failure alone", code, out, errb)
		}
	})
}
