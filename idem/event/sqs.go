package event

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/failurelog"
	"github.com/idemkit/idemkit/internal/clock"
)

// SQSConfig configures SQS. Only Operation is required.
type SQSConfig struct {
	// Operation names what the consumer does ("ship-order"); it scopes the
	// keys. Required.
	Operation string

	// Key returns a message's idempotency key. Default: its MessageId,
	// which every redelivery of the message keeps. Derive it from the body
	// (an order id) to also deduplicate a message that was sent twice.
	Key func(events.SQSMessage) (string, error)

	// Payload returns the bytes hashed under the key (a different payload
	// under a used key fails the record with idem.ErrPayloadMismatch, on
	// every delivery, until the queue's redrive policy moves it to the
	// dead-letter queue). Default: the Body. With Key taken from the body,
	// return the business fields only and leave delivery metadata out (a
	// send timestamp, a trace id): a producer that re-sends the same order
	// with a new timestamp then sends a duplicate, not a mismatch
	// (ExampleSQS_payload).
	Payload func(events.SQSMessage) ([]byte, error)

	// Tenant scopes the keys. Default: the Guard's SingleTenant name, or "".
	Tenant func(events.SQSMessage) string

	// Concurrency is how many records of a standard-queue batch are
	// processed at once. Default 1 (in order). FIFO queues (an event source
	// ARN ending in ".fifo") are always processed in order, one at a time.
	Concurrency int

	// SkipGroupOnError, for FIFO queues, reports only the failed record's
	// message group (its record and the group's later records) and goes on
	// with the other groups. Default false: processing stops at the first
	// failure and every record from it on is reported. Every receive of a
	// reported message, processed or not, counts toward the redrive
	// policy's maxReceiveCount, so by default a message that fails on every
	// delivery can take the unprocessed records of other groups received
	// after it in its batches to the dead-letter queue with it;
	// SkipGroupOnError keeps them apart.
	SkipGroupOnError bool
}

// SQSHandler is the Lambda handler of an SQS event source mapping with
// ReportBatchItemFailures enabled (FunctionResponseTypes:
// [ReportBatchItemFailures] in SAM/CloudFormation).
type SQSHandler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// SQS returns the handler of an SQS batch that runs fn once per message key
// (Func's guarantees, per record) and reports only the records that failed
// in BatchItemFailures, so SQS redelivers those alone:
//
//   - A record whose key already completed (a redelivered batch, a message
//     processed by a crashed invocation that recorded it) is acknowledged
//     without running fn; so is one whose key ran but whose record no
//     longer holds its value (idem.ErrNotKept), or holds one that does not
//     decode (recorded by another wrapping of the operation, logged as a
//     warning with the message id and the key's hash): fn ran and never
//     runs again for the key, so reporting it would only redeliver it until
//     the redrive policy moved it to the dead-letter queue.
//   - The key is the MessageId unless SQSConfig.Key says otherwise: a
//     message the producer sends twice has two ids, and runs twice.
//   - A record whose fn returns an error, panics or ends its goroutine
//     (runtime.Goexit), whose Key, Payload or Tenant function fails or
//     panics (or whose key is empty,
//     idem.ErrNoEventKey), whose key is in flight in another invocation
//     (idem.ErrInFlight), whose payload does not match
//     (idem.ErrPayloadMismatch), or whose claim failed is reported as a
//     failure, and so is every record the invocation has no time left to
//     start (its context done, or less than idem.Config.WaitMargin left
//     before its deadline, kept free to return the response: logged with
//     outcome "deadline", no store call made); the others are
//     acknowledged. fn's context ends that WaitMargin before the
//     invocation's deadline too, so a record that runs as long as its
//     context lets it is reported with the rest, rather than timing the
//     invocation out (which redelivers the whole batch). A failure that
//     repeats on every delivery (a mismatch, a key function that cannot
//     read a malformed body) is redelivered until the queue's redrive
//     policy moves the message to the dead-letter queue; without one,
//     until the queue's retention period drops it.
//   - In a FIFO queue, processing stops at the first failure and every
//     record from it on is reported, unprocessed, so the message groups keep
//     their order (with SkipGroupOnError, only the failed group's records
//     from it on).
//
// The handler itself never returns an error, so one bad record never makes
// SQS redeliver the whole batch. The event source mapping must report batch
// item failures, or SQS treats the empty error as success for every record.
func SQS(g *idem.Guard, cfg SQSConfig, fn func(context.Context, events.SQSMessage) error) (SQSHandler, error) {
	key := cfg.Key
	if key == nil {
		key = func(m events.SQSMessage) (string, error) { return m.MessageId, nil }
	}
	var p []string
	if cfg.Concurrency < 0 {
		p = append(p, "SQSConfig.Concurrency must be >= 0")
	}
	ecfg := Config[events.SQSMessage]{Operation: cfg.Operation, Key: key, Payload: cfg.Payload, Tenant: cfg.Tenant}
	var margin time.Duration
	if g != nil {
		margin = g.Config().WaitMargin
	}
	unit := func(ctx context.Context, m events.SQSMessage) (struct{}, error) {
		// fn's context ends WaitMargin before the invocation's
		// deadline, as a record not started does (notStarted): a fn
		// that runs as long as its context lets it still leaves the
		// handler the time to return the partial batch response.
		// Ending at the deadline, Lambda would time the invocation
		// out, discard the response and redeliver the whole batch.
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-margin))
			defer cancel()
		}
		return struct{}{}, fn(ctx, m)
	}
	a, problems := newAdapter(g, ecfg, unit, true)
	if p = append(problems, p...); len(p) > 0 {
		return nil, &idem.ConfigError{Problems: p}
	}
	conc := max(cfg.Concurrency, 1)
	mismatched := &seenIDs{}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		failed := make([]bool, len(ev.Records))
		process := func(i int) bool {
			m := ev.Records[i]
			if err := notStarted(ctx, margin); err != nil {
				// No time left for this record: reported for
				// redelivery, without a store call that could only
				// fail for want of time.
				failed[i] = true
				logRecordFailure(ctx, g, cfg.Operation, m, key, fmt.Errorf("%w: %w", errNotStarted, err))
				return false
			}
			_, err := a.run(ctx, m)
			if errors.Is(err, idem.ErrNotKept) {
				// The key's work ran and never runs again: done. Its
				// value, which fn does not return, was not kept, or
				// does not decode (recorded by another wrapping of the
				// operation): that is worth an operator's look.
				var u *undecodableError
				if errors.As(err, &u) {
					logUndecodable(ctx, g, cfg.Operation, m, key, err)
				}
				return true
			}
			if err != nil {
				failed[i] = true
				if !errors.Is(err, idem.ErrPayloadMismatch) {
					logRecordFailure(ctx, g, cfg.Operation, m, key, err)
				} else if mismatched.add(m.MessageId) {
					logMismatch(ctx, g, cfg.Operation, m, key, err)
				}
				return false
			}
			return true
		}
		// one processes record i on a goroutine of its own and reports
		// whether it is done.
		one := func(i int) (ok bool) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				m := ev.Records[i]
				returned := false
				defer func() {
					if returned {
						return
					}
					// A panic of a key, payload or tenant function (or
					// of fn with idem.Config.Disabled; otherwise
					// Guard.Once turns fn's panic into an error) fails
					// its record alone: escaping, it would fail the
					// whole batch, and end the process from a goroutine.
					// So does a function that ends its goroutine
					// (runtime.Goexit) without returning: its record
					// has no outcome and is never acknowledged as done
					// (RED_TEAM 450), and the batch goes on.
					err := errGoexit
					if r := recover(); r != nil {
						err = fmt.Errorf("%w: %v", idem.ErrEventPanic, r)
					}
					failed[i], ok = true, false
					logRecordFailure(ctx, g, cfg.Operation, m, key, err)
				}()
				ok = process(i)
				returned = true
			}()
			<-done
			return ok
		}
		if fifo := isFIFO(ev); fifo || conc == 1 {
			failedGroups := map[string]bool{}
			for i := range ev.Records {
				group := ev.Records[i].Attributes["MessageGroupId"]
				if fifo && cfg.SkipGroupOnError && failedGroups[group] {
					failed[i] = true // a later message of a failed group: not processed
					continue
				}
				if one(i) || !fifo {
					continue
				}
				if cfg.SkipGroupOnError {
					failedGroups[group] = true
					continue
				}
				for j := i + 1; j < len(ev.Records); j++ {
					failed[j] = true
				}
				break
			}
		} else {
			var wg sync.WaitGroup
			sem := make(chan struct{}, conc)
			for i := range ev.Records {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					one(i)
				})
			}
			wg.Wait()
		}
		var resp events.SQSEventResponse
		for i, f := range failed {
			if f {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			}
		}
		return resp, nil
	}, nil
}

// logRecordFailure is the one log line of a failed SQS record: the message
// id as it is (SQS assigns it; it is not a caller secret), the key as its
// hash (idem.Config.KeyHashSecret), never as it is unless it is the message
// id itself, the operation, the outcome and the error with the key redacted.
func logRecordFailure(ctx context.Context, g *idem.Guard, op string, m events.SQSMessage, key func(events.SQSMessage) (string, error), err error) {
	k := logKey(m, key)
	failurelog.Write(g, ctx, "idempotency: SQS record failed; reported for redelivery", op, k, k == m.MessageId, recordOutcome(err), err,
		slog.String("message_id", m.MessageId))
}

// logKey is m's key for a log line (hashed there), or "" when the key
// function fails or panics on it.
func logKey(m events.SQSMessage, key func(events.SQSMessage) (string, error)) (k string) {
	defer func() {
		if recover() != nil {
			k = ""
		}
	}()
	k, err := key(m)
	if err != nil {
		return ""
	}
	return k
}

// logMismatch is the one log line of a message whose payload differs from
// the one recorded under its key (idem.ErrPayloadMismatch): it fails the
// same way on every delivery, so it is logged once per message id (per
// handler instance), saying that it goes to the dead-letter queue.
func logMismatch(ctx context.Context, g *idem.Guard, op string, m events.SQSMessage, key func(events.SQSMessage) (string, error), err error) {
	k := logKey(m, key)
	failurelog.Write(g, ctx, "idempotency: SQS message's payload differs from the one recorded under its key; "+
		"it fails the same way on every delivery, until the queue's redrive policy (maxReceiveCount) moves it to the dead-letter queue. "+
		"A producer that re-sends with new delivery metadata (a timestamp, a trace id) needs SQSConfig.Payload to leave it out; "+
		"logged once for this message",
		op, k, k == m.MessageId, recordOutcome(err), err,
		slog.String("message_id", m.MessageId), slog.String("receive_count", m.Attributes["ApproximateReceiveCount"]))
}

// logUndecodable is the warning line of a message acknowledged because its
// key ran but the value recorded under it does not decode
// (undecodableError): the key's work is done, but another wrapping of the
// operation recorded it, which an operator should know of.
func logUndecodable(ctx context.Context, g *idem.Guard, op string, m events.SQSMessage, key func(events.SQSMessage) (string, error), err error) {
	k := logKey(m, key)
	failurelog.Write(g, ctx, "idempotency: SQS message's key already ran, but the value recorded under it does not decode "+
		"(another wrapping of the operation recorded it); acknowledged, the key's work is not run again",
		op, k, k == m.MessageId, idem.OutcomeReplay, err, slog.String("message_id", m.MessageId))
}

// seenIDs remembers the message ids already logged as mismatched, the last
// maxSeenIDs of them (a redelivery comes back within the queue's
// maxReceiveCount deliveries, each a visibility timeout apart).
type seenIDs struct {
	mu    sync.Mutex
	ids   map[string]bool
	order []string
}

const maxSeenIDs = 4096

// add reports whether id was not remembered yet, and remembers it.
func (s *seenIDs) add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids[id] {
		return false
	}
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	if len(s.order) >= maxSeenIDs {
		delete(s.ids, s.order[0])
		s.order = s.order[1:]
	}
	s.ids[id] = true
	s.order = append(s.order, id)
	return true
}

// errGoexit is the failure of a record whose processing ended its
// goroutine (runtime.Goexit) instead of returning.
var errGoexit = errors.New("idem: SQS record's processing ended its goroutine without returning (runtime.Goexit)")

// recordOutcome names why a record failed (the "outcome" log attribute).
// errNotStarted is the failure of a record the invocation had no time
// left to start (logged with outcome "deadline").
var errNotStarted = errors.New("idem: SQS record not started before the invocation's deadline")

// notStarted is why a record is not started: ctx is done, or less than
// margin (the Guard's WaitMargin) is left before its deadline, which is
// kept free to return the partial batch response. A record started there
// would run past the deadline: Lambda would end the invocation as timed
// out, discard the response and redeliver the whole batch.
func notStarted(ctx context.Context, margin time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if left, ok := clock.Remaining(ctx); ok {
		if left < margin {
			return fmt.Errorf("%w: %v left, less than the %v kept to return the batch response (idem.Config.WaitMargin)", context.DeadlineExceeded, left.Round(time.Millisecond), margin)
		}
	}
	return nil
}

func recordOutcome(err error) string {
	switch {
	case errors.Is(err, errNotStarted):
		return "deadline"
	case errors.Is(err, idem.ErrInFlight):
		return idem.OutcomeInFlight
	case errors.Is(err, idem.ErrPayloadMismatch):
		return idem.OutcomeMismatch
	case errors.Is(err, idem.ErrStoreUnavailable):
		return "store-unavailable"
	case errors.Is(err, idem.ErrLeaseLost):
		return "lease-lost"
	case errors.Is(err, idem.ErrNotCommitted):
		return "not-committed"
	case errors.Is(err, idem.ErrNoEventKey), errors.Is(err, errKey):
		return "no-key"
	}
	return "handler-error"
}

func isFIFO(ev events.SQSEvent) bool {
	return len(ev.Records) > 0 && strings.HasSuffix(ev.Records[0].EventSourceARN, ".fifo")
}
