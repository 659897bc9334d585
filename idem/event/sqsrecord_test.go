package event_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// A key, payload or tenant function that panics on one malformed message
// (or fn itself, with idem.Config.Disabled, where no Guard.Once recovers
// it) fails that record alone: the handler neither panics nor returns an
// error (which would make SQS redeliver the whole batch, and with
// Concurrency above 1 would end the process), and the other records are
// processed; the failure is logged with its message id.
func TestSQSRecordFunctionPanicFailsOnlyItsRecord(t *testing.T) {
	bad := func(m events.SQSMessage) bool { return strings.Contains(m.Body, `"3"`) }
	for _, which := range []string{"Key", "Payload", "Tenant", "fn (Disabled)"} {
		for _, tc := range []struct {
			arn  string
			conc int
			want string
		}{
			{"arn:aws:sqs:us-east-1:1:orders", 1, "m-3"},
			{"arn:aws:sqs:us-east-1:1:orders", 4, "m-3"},
			{"arn:aws:sqs:us-east-1:1:orders.fifo", 1, "m-3,m-4,m-5"},
		} {
			t.Run(fmt.Sprintf("%s %s conc %d", which, tc.arn, tc.conc), func(t *testing.T) {
				e := newEnv(t, func(c *idem.Config) { c.Disabled = which == "fn (Disabled)" })
				g := e.guard
				cfg := event.SQSConfig{Operation: "ship", Concurrency: tc.conc}
				switch which {
				case "Key":
					cfg.Key = func(m events.SQSMessage) (string, error) {
						if bad(m) {
							var fields []string
							return fields[1], nil // index out of range
						}
						return m.MessageId, nil
					}
				case "Payload":
					cfg.Payload = func(m events.SQSMessage) ([]byte, error) {
						if bad(m) {
							var p *struct{ b []byte }
							return p.b, nil // nil dereference
						}
						return []byte(m.Body), nil
					}
				case "Tenant":
					cfg.Tenant = func(m events.SQSMessage) string {
						if bad(m) {
							panic("no tenant in " + m.MessageId)
						}
						return "shop"
					}
				}
				var runs atomic.Int32
				h, err := event.SQS(g, cfg, func(_ context.Context, m events.SQSMessage) error {
					if which == "fn (Disabled)" && bad(m) {
						panic("fn: malformed message")
					}
					runs.Add(1)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				var r events.SQSEventResponse
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("the handler panicked: %v", p)
						}
					}()
					r, err = h(context.Background(), sqsBatch(tc.arn, "1", "2", "3", "4", "5"))
				}()
				if err != nil || failedIDs(r) != tc.want {
					t.Fatalf("failures %q %v, want %q", failedIDs(r), err, tc.want)
				}
				if want := int32(5 - len(strings.Split(tc.want, ","))); runs.Load() != want {
					t.Fatalf("fn ran %d times, want %d", runs.Load(), want)
				}
				logs := e.logs.String()
				if !strings.Contains(logs, `"message_id":"m-3"`) || !strings.Contains(logs, "panic") {
					t.Fatalf("the panic is not logged with its message id:\n%s", logs)
				}
			})
		}
	}
}

// A key function's error fails its record alone, reported for redelivery,
// and the others are processed.
func TestSQSKeyErrorFailsOnlyItsRecord(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var runs atomic.Int32
	h, _ := event.SQS(g, event.SQSConfig{Operation: "ship", Key: func(m events.SQSMessage) (string, error) {
		switch m.MessageId {
		case "m-2":
			return "", errors.New("no order id")
		case "m-4":
			return "", nil
		}
		return m.MessageId, nil
	}}, func(context.Context, events.SQSMessage) error { runs.Add(1); return nil })
	r, err := h(context.Background(), sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2", "3", "4", "5"))
	if err != nil || failedIDs(r) != "m-2,m-4" || runs.Load() != 3 {
		t.Fatalf("failures %q %v runs %d", failedIDs(r), err, runs.Load())
	}
}

// A message whose key already ran, but whose recorded value does not
// decode into what the adapter returns (the operation's value recorded by
// another wrapping of it: a consumer moved from event.Func to event.SQS
// under the same Operation, say), is done as well: fn ran for the key and
// never runs again, so the record is acknowledged, with one warning line
// naming the message and the key's hash. Reported as a failure, it was
// redelivered on every receive until the redrive policy moved it to the
// dead-letter queue, and failed the same way after any redrive. Func's
// caller gets an error that matches idem.ErrNotKept (the work ran, its
// value cannot be given back, a retry gets the same), with the decoding
// error in its text.
func TestSQSUndecodableValueIsAcknowledged(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	// The operation's first consumer: a Func whose value is a list.
	first, err := event.Func(g, event.Config[events.SQSMessage]{Operation: "ship", Key: func(m events.SQSMessage) (string, error) { return m.MessageId, nil }},
		func(context.Context, events.SQSMessage) ([]int, error) { return []int{1}, nil })
	if err != nil {
		t.Fatal(err)
	}
	ev := sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1")
	if _, err := first(context.Background(), ev.Records[0]); err != nil {
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
	for receive := 1; receive <= 2; receive++ {
		r, err := h(context.Background(), sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2"))
		if err != nil || len(r.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: failures %q %v; want m-1 acknowledged (its key ran) and m-2 processed", receive, failedIDs(r), err)
		}
	}
	if fmt.Sprint(runs) != "map[m-2:1]" {
		t.Fatalf("runs %v", runs)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "cannot unmarshal array"); n != 2 || !strings.Contains(logs, `"message_id":"m-1"`) || !strings.Contains(logs, `"level":"WARN"`) {
		t.Fatalf("want one warning per delivery of m-1 naming it; logs:\n%s", logs)
	}
	// Func's caller can tell: the work ran, its value cannot be given.
	other, err := event.Func(g, event.Config[events.SQSMessage]{Operation: "ship", Key: func(m events.SQSMessage) (string, error) { return m.MessageId, nil }},
		func(context.Context, events.SQSMessage) (string, error) { t.Error("ran again"); return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other(context.Background(), ev.Records[0]); !errors.Is(err, idem.ErrNotKept) || !strings.Contains(err.Error(), "does not decode into string") {
		t.Fatalf("Func over a value that does not decode: %v, want one matching idem.ErrNotKept", err)
	}
}
