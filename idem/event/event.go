// Package event makes Lambda handlers of any event type idempotent with an
// idem.Guard: Func wraps a function of any event (EventBridge, DynamoDB or
// Kinesis stream records, Step Functions tasks, direct invocations), SQS
// wraps an SQS batch handler that reports only its failed records.
//
//	guard, _ := idem.New(idem.Config{Store: store, Tenant: idem.SingleTenant("shop")})
//	consumer, _ := event.SQS(guard, event.SQSConfig{Operation: "ship-order"}, shipOrder)
//	lambda.Start(consumer)
//
// Both run over Guard.Once, so they keep the guarantees of the HTTP
// adapters: a key's work runs to a recorded value at most once, errors are
// never cached, and every write after the claim is fenced. Event scopes
// never share a keyspace with HTTP requests.
//
// SQS keys a message by its MessageId unless SQSConfig.Key says otherwise:
// every redelivery of one message keeps its id, so a redelivery never runs
// the work twice, but a message the producer sends again (a retried
// SendMessage, a resend after a timeout) gets a new id and runs again.
// To deduplicate those too, derive the key from the body (an order id).
package event

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/failurelog"
	"github.com/idemkit/idemkit/idem/internal/notkept"
)

// Config configures Func for events of type In.
type Config[In any] struct {
	// Operation names what the function does ("charge-order"): it scopes
	// keys as a route does for HTTP. Required.
	Operation string

	// Key returns the idempotency key of an event: the same for every
	// delivery of one logical event, e.g. an SQS message id, an EventBridge
	// event id, or a business id from the body ("order-42/refund"). Any
	// string; only its hash is stored. Required. An empty key fails the
	// event with idem.ErrNoEventKey; the function does not run.
	Key func(In) (string, error)

	// Payload returns the bytes that identify the request under its key,
	// hashed as they are (canon.RecipeBytes): the same key with a different
	// payload fails with idem.ErrPayloadMismatch. It must be equal on every
	// delivery of one event, so it must leave out delivery metadata.
	// Default: the message body for events.SQSMessage, the JSON encoding of
	// the event for any other type.
	Payload func(In) ([]byte, error)

	// Tenant returns the tenant that scopes the key, so that two tenants'
	// equal keys never meet. Default: the Guard's SingleTenant name, or ""
	// (one keyspace per operation). Event scopes never share a keyspace
	// with HTTP requests.
	Tenant func(In) string
}

// Func wraps fn, a function of any event type (SQS, EventBridge, DynamoDB
// or Kinesis stream records, Step Functions tasks, direct invocations), so
// that it runs once per key, with the guarantees of the HTTP adapters:
//
//   - Of any number of concurrent or later deliveries with the same key and
//     payload, fn runs to a returned value at most once, as long as it
//     finishes within its lease (idem.Config.Lease renewed by a heartbeat;
//     inside Lambda capped by the remaining time plus idem.Config.LeaseSkew);
//     every other delivery gets that value back (decoded from its
//     JSON encoding) without running fn. A value whose JSON encoding is
//     larger than idem.MaxResponseBytes is not kept: every other delivery
//     fails with idem.ErrNotKept and fn never runs again for the key (a
//     caller that only needs fn to have run treats it as done: returned
//     from a Lambda handler it is a function error, which the event
//     source retries, a stream's shard until its retry limit). So is a
//     value with no JSON encoding (a float at ±Inf or NaN, a MarshalJSON
//     that fails), and a value whose encoding would replay another value
//     (a string that is not valid UTF-8, encoded with U+FFFD for each
//     invalid byte): the delivery that ran fn gets it, every other one
//     idem.ErrNotKept.
//   - An error (or panic) of fn is never cached: it is returned, the record
//     is left retryable and the next delivery runs fn again.
//   - A delivery that arrives while another holds the claim waits for its
//     outcome (idem.Config.Wait, bounded by the context deadline), else fails
//     with idem.ErrInFlight.
//   - The same key with a different payload fails with idem.ErrPayloadMismatch.
//   - A recorded value that does not decode into Out (recorded by another
//     wrapping of the operation with another value type) fails every
//     delivery with an error matching idem.ErrNotKept: fn ran for the key
//     and never runs again, and its value cannot be given back.
//   - Every write after the claim is fenced on the claim's owner token: an
//     invocation whose lease was taken over cannot record its value (it gets
//     idem.ErrLeaseLost), and writes registered with idem.Transact commit in the same
//     transaction as the completion, or not at all.
//
// Out must survive a JSON round trip, since a replay returns the decoded
// cached value. A concrete Out is replayed equal when its JSON encoding
// holds all of it: what encoding/json leaves out is replayed as its zero
// value (an unexported field, a field tagged "-", an empty slice or map
// under omitempty, which comes back nil), and a nil json.RawMessage
// comes back as the bytes null. An Out of an interface
// type (any) is replayed in JSON's types: a number as a float64 (an
// integer past 2^53 loses its low digits), an object as a
// map[string]any. Use a concrete type when every delivery must see the
// same value and type. Store round trips are those of the HTTP adapters: two for a
// first execution, one for a replay. With idem.Config.Disabled, fn runs directly.
//
// Func is a thin layer over Guard.Once: it derives the key, payload and
// tenant from the event and maps the recorded JSON value back to Out.
func Func[In, Out any](g *idem.Guard, cfg Config[In], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	a, p := newAdapter(g, cfg, fn, false)
	if len(p) > 0 {
		return nil, &idem.ConfigError{Problems: p}
	}
	return a.run, nil
}

// adapter is one wrapped function: its Config, and what it reads of the
// Guard's configuration, which never changes after idem.New, read once.
type adapter[In, Out any] struct {
	g   *idem.Guard
	cfg Config[In]
	fn  func(context.Context, In) (Out, error)
	// disabled is the Guard's Config.Disabled; single its SingleTenant
	// name, the default tenant when cfg.Tenant is nil.
	disabled bool
	single   string
	// logsFailures: the caller logs each failed event itself (SQS).
	logsFailures bool
}

// newAdapter checks cfg and fn and returns the adapter with every problem
// found.
func newAdapter[In, Out any](g *idem.Guard, cfg Config[In], fn func(context.Context, In) (Out, error), logsFailures bool) (*adapter[In, Out], []string) {
	var p []string
	if g == nil {
		p = append(p, "event.Func needs a Guard (idem.New)")
	}
	if strings.TrimSpace(cfg.Operation) == "" {
		p = append(p, "event.Config.Operation is required (it names the work, e.g. \"charge-order\")")
	}
	if cfg.Key == nil {
		p = append(p, "event.Config.Key is required (a function returning the event's idempotency key)")
	}
	if fn == nil {
		p = append(p, "event.Func needs a function to wrap")
	}
	if len(p) > 0 {
		return nil, p
	}
	gc := g.Config()
	single, _ := gc.Tenant.Single()
	return &adapter[In, Out]{g: g, cfg: cfg, fn: fn, disabled: gc.Disabled, single: single, logsFailures: logsFailures}, nil
}

func (a *adapter[In, Out]) run(ctx context.Context, ev In) (Out, error) {
	var zero Out
	if a.disabled {
		return a.fn(ctx, ev)
	}
	key, err := a.cfg.Key(ev)
	if err != nil {
		return zero, fmt.Errorf("%w: %w", errKey, err)
	}
	if key == "" {
		return zero, idem.ErrNoEventKey
	}
	var payload []byte
	if a.cfg.Payload != nil {
		payload, err = a.cfg.Payload(ev)
	} else {
		payload, err = defaultPayload(ev)
	}
	if err != nil {
		return zero, fmt.Errorf("idem: event payload: %w", err)
	}
	tenant := a.single
	if a.cfg.Tenant != nil {
		tenant = a.cfg.Tenant(ev)
	}
	var out Out
	if a.logsFailures {
		ctx = failurelog.Adapter(ctx)
	}
	value, ran, err := a.g.Once(ctx, idem.Work{
		Operation: a.cfg.Operation, Key: key, Tenant: tenant, Payload: payload,
		Run: func(ctx context.Context) ([]byte, error) {
			var err error
			out, err = a.fn(ctx, ev)
			if err != nil {
				return nil, err
			}
			body, err := json.Marshal(out)
			if err != nil {
				// fn ran: its value is recorded as not kept, never
				// left for fn to run again.
				return nil, notkept.Value(fmt.Errorf("idem: event result cannot be kept (JSON): %w", err))
			}
			if lossy(body) {
				// A string that is not UTF-8: its encoding holds
				// U+FFFD for each invalid byte, so a replay would
				// be another value. Not kept, as above.
				return nil, notkept.Value(errors.New("idem: event result cannot be kept (JSON): a string is not valid UTF-8"))
			}
			return body, nil
		},
	})
	switch {
	case err != nil:
		return zero, err
	case ran:
		return out, nil
	}
	var cached Out
	if err := json.Unmarshal(value, &cached); err != nil {
		return zero, &undecodableError{fmt.Errorf("idem: the key's work already ran; its cached event result does not decode into %T: %w", cached, err)}
	}
	return cached, nil
}

// errKey wraps the error of a Config.Key function: the event's key cannot
// be derived (the SQS adapter logs it with outcome "no-key", as an empty
// key).
var errKey = errors.New("idem: event key")

// undecodableError is a key's recorded value that does not decode into
// the adapter's Out (recorded by another wrapping of the operation, with
// another value type): the key's work ran and never runs again, and its
// value cannot be given back, on this delivery or any other. It matches
// idem.ErrNotKept, so that a caller that only needs the work to have run
// treats it as done (the SQS adapter acknowledges the record), and the
// decoding error.
type undecodableError struct{ err error }

func (e *undecodableError) Error() string   { return e.err.Error() }
func (e *undecodableError) Unwrap() []error { return []error{idem.ErrNotKept, e.err} }

// lossy reports whether body, the output of json.Marshal, holds the
// escape \ufffd: encoding/json writes it for each byte of a string that is
// not valid UTF-8 (a valid U+FFFD is written as it is), so the encoding
// decodes to another value than the one encoded. A MarshalJSON that writes
// the escape itself is taken for lossy too: its value is not kept, never
// replayed changed.
func lossy(body []byte) bool {
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`\ufffd`))
		if j < 0 {
			return false
		}
		j += i
		// An escape only when preceded by an even number of
		// backslashes (`\\ufffd` is a backslash and "ufffd").
		n := 0
		for k := j - 1; k >= 0 && body[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// defaultPayload is the body of an SQS message (its attributes change
// between deliveries), else the JSON encoding of the event.
func defaultPayload(ev any) ([]byte, error) {
	switch m := ev.(type) {
	case events.SQSMessage:
		return []byte(m.Body), nil
	case *events.SQSMessage:
		return []byte(m.Body), nil
	}
	return json.Marshal(ev)
}
