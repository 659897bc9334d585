package event_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/event"
)

// lostValueStore stands for a store that holds a key's final record but no
// longer its whole response (a part kept beside the record is gone): its
// Claim answers the record with an error matching idem.ErrNotKept, as
// idem/dynamostore does for a missing chunk.
type lostValueStore struct {
	idem.Store
	lost atomic.Bool
}

func (s *lostValueStore) Claim(ctx context.Context, r idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, r, now)
	if err == nil && s.lost.Load() && res.Decision == idem.Exists && res.Record.State.Final() {
		res.Record.Response = nil
		return res, fmt.Errorf("%w: test: the response beside the record is gone", idem.ErrNotKept)
	}
	return res, err
}

// A message whose key already ran, but whose recorded value is not kept
// (idem.ErrNotKept), is done: fn ran and never runs again for the key, so
// the record is acknowledged. Reported as a failure, SQS would redeliver it
// on every receive until the redrive policy moved a processed message to
// the dead-letter queue.
func TestSQSNotKeptIsAcknowledged(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprint("fifo ", fifo), func(t *testing.T) {
			e := newEnv(t, nil)
			st := &lostValueStore{Store: e.store}
			g, err := idem.New(idem.Config{Store: st, Tenant: idem.SingleTenant("shop"), Wait: -1})
			if err != nil {
				t.Fatal(err)
			}
			runs := map[string]int{}
			h, err := event.SQS(g, event.SQSConfig{Operation: "ship"}, func(_ context.Context, m events.SQSMessage) error {
				runs[m.MessageId]++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			arn := "arn:aws:sqs:us-east-1:1:orders"
			if fifo {
				arn += ".fifo"
			}
			if r, err := h(context.Background(), sqsBatch(arn, "1")); err != nil || len(r.BatchItemFailures) != 0 {
				t.Fatalf("first delivery: %q %v", failedIDs(r), err)
			}
			st.lost.Store(true)
			for receive := 2; receive <= 3; receive++ {
				r, err := h(context.Background(), sqsBatch(arn, "1", "2"))
				if err != nil || len(r.BatchItemFailures) != 0 {
					t.Fatalf("delivery %d: failures %q %v; want m-1 acknowledged (it ran) and m-2 processed", receive, failedIDs(r), err)
				}
			}
			if fmt.Sprint(runs) != "map[m-1:1 m-2:1]" {
				t.Fatalf("runs %v", runs)
			}
		})
	}
}
