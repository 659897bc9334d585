package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/idemkit/idemkit/idem/keyspace"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/idemkit/idemkit/internal/apierr"
)

// EventConfig configures Event for events of type In.
type EventConfig[In any] struct {
	// Operation names what the function does ("charge-order"): it scopes
	// keys as a route does for HTTP. Required.
	Operation string

	// Key returns the idempotency key of an event: the same for every
	// delivery of one logical event, e.g. an SQS message id, an EventBridge
	// event id, or a business id from the body ("order-42/refund"). Any
	// string; only its hash is stored. Required. An empty key fails the
	// event with ErrNoEventKey; the function does not run.
	Key func(In) (string, error)

	// Payload returns the bytes that identify the request under its key,
	// hashed as they are (RecipeBytes): the same key with a different
	// payload fails with ErrPayloadMismatch. It must be equal on every
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

// eventTenantPrefix separates event scopes from HTTP scopes ("tenant:",
// "anon:"): an event key can never replay or block an HTTP request.
const eventTenantPrefix = "event:"

// Event wraps fn, a function of any event type (SQS, EventBridge, DynamoDB
// or Kinesis stream records, Step Functions tasks, direct invocations), so
// that it runs once per key, with the guarantees of the HTTP adapters:
//
//   - Of any number of concurrent or later deliveries with the same key and
//     payload, fn runs to a returned value at most once, as long as it
//     finishes within its lease (Config.Lease renewed by a heartbeat;
//     inside Lambda capped by the remaining time plus Config.LeaseSkew);
//     every other delivery gets that value back (decoded from its
//     JSON encoding) without running fn.
//   - An error (or panic) of fn is never cached: it is returned, the record
//     is left retryable and the next delivery runs fn again.
//   - A delivery that arrives while another holds the claim waits for its
//     outcome (Config.Wait, bounded by the context deadline), else fails
//     with ErrInFlight.
//   - The same key with a different payload fails with ErrPayloadMismatch.
//   - Every write after the claim is fenced on the claim's owner token: an
//     invocation whose lease was taken over cannot record its value (it gets
//     ErrLeaseLost), and writes registered with Transact commit in the same
//     transaction as the completion, or not at all.
//
// Out must survive a JSON round trip, since a replay returns the decoded
// cached value. Store round trips are those of the HTTP adapters: two for a
// first execution, one for a replay. With Config.Disabled, fn runs directly.
func Event[In, Out any](g *Guard, cfg EventConfig[In], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	var p []string
	if g == nil {
		p = append(p, "Event needs a Guard (idem.New)")
	}
	if strings.TrimSpace(cfg.Operation) == "" {
		p = append(p, "EventConfig.Operation is required (it names the work, e.g. \"charge-order\")")
	}
	if cfg.Key == nil {
		p = append(p, "EventConfig.Key is required (a function returning the event's idempotency key)")
	}
	if fn == nil {
		p = append(p, "Event needs a function to wrap")
	}
	if len(p) > 0 {
		return nil, &ConfigError{Problems: p}
	}
	return func(ctx context.Context, ev In) (Out, error) {
		return runEvent(ctx, g, &cfg, ev, fn)
	}, nil
}

func runEvent[In, Out any](ctx context.Context, g *Guard, cfg *EventConfig[In], ev In, fn func(context.Context, In) (Out, error)) (Out, error) {
	var zero Out
	if g.cfg.Disabled {
		return fn(ctx, ev)
	}
	key, err := cfg.Key(ev)
	if err != nil {
		return zero, fmt.Errorf("idem: event key: %w", err)
	}
	if key == "" {
		return zero, ErrNoEventKey
	}
	var payload []byte
	if cfg.Payload != nil {
		payload, err = cfg.Payload(ev)
	} else {
		payload, err = defaultPayload(ev)
	}
	if err != nil {
		return zero, fmt.Errorf("idem: event payload: %w", err)
	}
	tenant := ""
	if cfg.Tenant != nil {
		tenant = cfg.Tenant(ev)
	} else if g.cfg.Tenant.Kind == tenantSingle {
		tenant = g.cfg.Tenant.Name
	}
	requestID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		requestID = lc.AwsRequestID
	}
	t := &txn{
		g:      g,
		in:     &request{method: "EVENT", operation: cfg.Operation, keyValues: []string{key}, requestID: requestID},
		key:    key,
		op:     cfg.Operation,
		id:     keyspace.ID(eventTenantPrefix+tenant, cfg.Operation, key),
		digest: digestBytes(payload),
	}

	// The claim, lease, heartbeat, wait, replay and fenced completion are
	// the HTTP adapters' own (txn.claim): fn's outcome travels as a response
	// (a value as a 200 JSON body, which is cached; an error as a 500, which
	// is not), and the adapter's answer is mapped back.
	var (
		ran    bool
		out    Out
		fnErr  error
		result *Response
	)
	resp := t.claim(ctx, func(ctx context.Context) (_ *Response, err error) {
		ran = true
		defer func() {
			if r := recover(); r != nil {
				fnErr = fmt.Errorf("%w: %v", ErrEventPanic, r)
				err = fnErr
			}
		}()
		out, fnErr = fn(ctx, ev)
		if fnErr != nil {
			return nil, fnErr
		}
		body, mErr := json.Marshal(out)
		if mErr != nil {
			fnErr = fmt.Errorf("idem: event result cannot be cached (JSON): %w", mErr)
			return nil, fnErr
		}
		result = &Response{Status: 200, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: body}
		return result, nil
	})
	switch {
	case ran && fnErr != nil:
		return zero, fnErr
	case ran && result != nil && (resp.Status == 200 || t.unrecorded):
		// Recorded, or (the store failed or stalled after the fact) true
		// but unrecorded: fn's effects happened once, so its result stands.
		return out, nil
	case ran && result != nil && resp.Status == 409:
		// The completion was fenced: the lease was taken over while fn ran.
		return zero, ErrLeaseLost
	case ran && result != nil:
		return zero, ErrNotCommitted
	case resp.Status == 200:
		var cached Out
		if err := json.Unmarshal(resp.Body, &cached); err != nil {
			return zero, fmt.Errorf("idem: cached event result does not decode into %T: %w", cached, err)
		}
		return cached, nil
	}
	switch t.failCode {
	case apierr.CodeIdempotencyKeyMismatch:
		return zero, ErrPayloadMismatch
	case apierr.CodeIdempotencyInFlight:
		return zero, ErrInFlight
	}
	if t.claimErr != nil {
		return zero, fmt.Errorf("%w: %w", ErrStoreUnavailable, t.claimErr)
	}
	return zero, ErrStoreUnavailable
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
