package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// SQS delivers one batch to two invocations at once (a standard queue's
// at-least-once delivery): each message ships once. A message one
// invocation reports failed (its twin still in flight) is acknowledged on
// its redelivery without shipping again.
func TestConsumerParallelDuplicateDeliveriesShipOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		setLocalEnv(t, e)
		_, shipOrders, err := handlers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("par-%d", time.Now().UnixNano())
		var recs []events.SQSMessage
		for i := range 3 {
			recs = append(recs, events.SQSMessage{MessageId: fmt.Sprintf("%s-%d", id, i), Body: fmt.Sprintf(`{"order":"%d"}`, i)})
		}
		before := shipments.Load()
		start := make(chan struct{})
		var wg sync.WaitGroup
		failed := make([][]string, 2)
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resp, err := shipOrders(context.Background(), events.SQSEvent{Records: recs})
				if err != nil {
					t.Errorf("invocation %d: %v", g, err)
				}
				for _, f := range resp.BatchItemFailures {
					failed[g] = append(failed[g], f.ItemIdentifier)
				}
			}()
		}
		close(start)
		wg.Wait()
		var again []events.SQSMessage
		for _, m := range recs {
			if slices.Contains(failed[0], m.MessageId) || slices.Contains(failed[1], m.MessageId) {
				again = append(again, m)
			}
		}
		if len(again) > 0 {
			resp, err := shipOrders(context.Background(), events.SQSEvent{Records: again})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("the redelivery of %d messages: %v %v", len(again), resp.BatchItemFailures, err)
			}
		}
		if n := shipments.Load() - before; n != 3 {
			t.Fatalf("shipped %d times for 3 messages delivered twice at once", n)
		}
	})
}
