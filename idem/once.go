package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/idemkit/idemkit/idem/internal/failurelog"
	"github.com/idemkit/idemkit/idem/internal/notkept"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/apierr"
)

// Work is one unit of work that Guard.Once runs at most once per key: the
// primitive under the Lambda event adapters (package idem/event), for any
// work that is not an HTTP request.
type Work struct {
	// Operation names what the work does ("charge-order"): it scopes Key
	// as a route does for HTTP, so two kinds of work keyed by one business
	// id never share a record. Required: Once refuses work without one
	// (empty or only spaces) with a *ConfigError (ErrConfig), and Run does
	// not run.
	Operation string
	// Key is the idempotency key: the same for every delivery of one
	// logical piece of work. Any string; only its hash is stored. Required:
	// an empty key is ErrNoEventKey and Run does not run.
	Key string
	// Tenant scopes Key, so that two tenants' equal keys never meet. ""
	// is one keyspace per operation. Work scopes never share a keyspace
	// with HTTP requests.
	Tenant string
	// Payload identifies the work under its key, hashed as it is
	// (canon.RecipeBytes): the same key with a different payload fails with
	// ErrPayloadMismatch.
	Payload []byte
	// Run does the work and returns its value (JSON, since a replay hands
	// it to callers that decode it), which is recorded and replayed. An
	// error or a panic is never recorded. Required, as Operation is.
	Run func(ctx context.Context) ([]byte, error)
}

// methodEvent is the method of a Guard.Once unit of work.
const methodEvent = "EVENT"

// workTenantPrefix separates work scopes from HTTP scopes ("tenant:",
// "anon:"): a work key can never replay or block an HTTP request.
const workTenantPrefix = "event:"

// Once runs w.Run at most once per (Tenant, Operation, Key), with the
// guarantees of the HTTP adapters:
//
//   - Of any number of concurrent or later calls with the same key and
//     payload, Run runs to a returned value at most once, as long as it
//     finishes within its lease (Config.Lease renewed by a heartbeat;
//     inside Lambda capped by the remaining time plus Config.LeaseSkew).
//     Run's context ends with cause ErrLeaseLost before the lease written
//     last ends when renewals fail or are fenced, so no other call runs
//     Run while that context is live;
//     every other call gets that value back without running it, and ran
//     false.
//   - An empty value (nil, or an empty slice) is nil on every call, the
//     one that ran Run included: a replay cannot tell them apart.
//   - A value larger than MaxResponseBytes is returned to the call that
//     ran Run, and recorded as not kept (Response.NotKept): every other
//     call fails with ErrNotKept, ran false, and Run never runs again for
//     the key. So is a value its adapter cannot encode (idem/event's
//     Func, a value with no JSON encoding): the call that ran Run gets a
//     nil value and no error, its adapter the value it could not encode.
//   - An error (or panic, as an error wrapping ErrEventPanic) of Run is
//     never cached: it is returned with ran true, the record is left
//     retryable and the next call runs Run again.
//   - A call that arrives while another holds the claim waits for its
//     outcome (Config.Wait, bounded by the context deadline), else fails
//     with ErrInFlight.
//   - The same key with a different payload fails with ErrPayloadMismatch.
//   - Every write after the claim is fenced on the claim's owner token: a
//     call whose lease was taken over cannot record its value (it gets
//     ErrLeaseLost), and writes registered with Transact commit in the same
//     transaction as the completion, or not at all (else ErrNotCommitted).
//   - A store whose table is missing or has another key schema is
//     ErrStoreMisconfigured (not ErrStoreUnavailable: retrying will not
//     help).
//   - A store that cannot be used is ErrStoreUnavailable. When the store
//     fails after Run succeeded, Run's value stands (its effects happened
//     once) and is returned with ran true.
//   - A call whose ctx is cancelled (not timed out) while the key is
//     claimed or waited on fails with context.Canceled, never
//     ErrStoreUnavailable; the claim is released.
//
// Store round trips are those of the HTTP adapters: two for a first
// execution, one for a replay. With Config.Disabled, Run runs directly
// (work without an Operation or a Run is refused all the same).
func (g *Guard) Once(ctx context.Context, w Work) (value []byte, ran bool, err error) {
	var problems []string
	if strings.TrimSpace(w.Operation) == "" {
		problems = append(problems, `Work.Operation is required (it names the work, e.g. "charge-order", and scopes its key)`)
	}
	if w.Run == nil {
		problems = append(problems, "Work.Run is required")
	}
	if problems != nil {
		return nil, false, &ConfigError{Problems: problems}
	}
	if g.cfg.Disabled {
		v, err := w.Run(ctx)
		return v, true, err
	}
	if w.Key == "" {
		return nil, false, ErrNoEventKey
	}
	requestID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		requestID = lc.AwsRequestID
	}
	// The transaction and its claim's store call context, one
	// allocation (as a keyed request's names carry theirs: claimNames).
	tx := &struct {
		txn  txn
		call callCtx
	}{txn: txn{
		g:      g,
		in:     &request{method: methodEvent, operation: w.Operation, keyValues: []string{w.Key}, requestID: requestID},
		key:    w.Key,
		op:     w.Operation,
		id:     keyspace.ID(workTenantPrefix+w.Tenant, w.Operation, w.Key),
		digest: digestBytes(w.Payload),
		// The adapter (idem/event's SQS) may log each failure itself.
		adapterLogs: failurelog.Logged(ctx),
	}}
	t := &tx.txn
	t.slot = &tx.call

	// The claim, lease, heartbeat, wait, replay and fenced completion are
	// the HTTP adapters' own (txn.claim): Run's outcome travels as a
	// response (a value as a 200 JSON body, which is cached; an error as a
	// 500, which is not), and the adapter's answer is mapped back.
	var (
		runErr error
		result *Response
	)
	resp := t.claim(ctx, func(ctx context.Context) (_ *Response, err error) {
		ran = true
		defer func() {
			if r := recover(); r != nil {
				runErr = fmt.Errorf("%w: %v", ErrEventPanic, r)
				err = runErr
			}
		}()
		body, err := w.Run(ctx)
		var unkept *notkept.Error
		if errors.As(err, &unkept) {
			// Run ran to a value its adapter cannot encode: recorded as
			// not kept (NotKept marks it for execute), so that Run
			// never runs again for the key.
			result = &Response{Status: 200, NotKept: 1}
			return result, nil
		}
		if err != nil {
			runErr = err
			return nil, err
		}
		result = &Response{Status: 200, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: body}
		return result, nil
	})
	switch {
	case ran && runErr != nil:
		return nil, true, runErr
	case ran && result != nil && (resp.Status == 200 || t.unrecorded):
		// Recorded, or (the store failed or stalled after the fact) true
		// but unrecorded: Run's effects happened once, so its value stands.
		return emptyNil(result.Body), true, nil
	case ran && result != nil && resp.Status == 409:
		// The completion was fenced: the lease was taken over while Run ran.
		return nil, true, ErrLeaseLost
	case ran && result != nil && t.storeErr != nil:
		return nil, true, fmt.Errorf("%w: %w", ErrNotCommitted, t.storeErr)
	case ran && result != nil:
		return nil, true, ErrNotCommitted
	case resp.Status == 200:
		return emptyNil(resp.Body), false, nil
	}
	switch t.failCode {
	case apierr.CodeIdempotencyKeyMismatch:
		return nil, false, ErrPayloadMismatch
	case apierr.CodeIdempotencyInFlight:
		return nil, false, ErrInFlight
	case CodeResponseNotKept:
		if errors.Is(t.storeErr, ErrNotKept) {
			return nil, false, t.storeErr // the store's: part of the value is gone
		}
		return nil, false, ErrNotKept
	}
	if t.failCode == CodeClientClosed {
		return nil, false, context.Canceled
	}
	if errors.Is(t.storeErr, ErrStoreMisconfigured) {
		return nil, false, t.storeErr // not retryable: never ErrStoreUnavailable
	}
	if t.storeErr != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrStoreUnavailable, t.storeErr)
	}
	return nil, false, ErrStoreUnavailable
}

// emptyNil is an empty value as nil (RED_TEAM 551): a store keeps no empty
// body apart from none, so a replay cannot tell an empty value from nil,
// and the call that ran Run must not either.
func emptyNil(v []byte) []byte {
	if len(v) == 0 {
		return nil
	}
	return v
}

// logFailure is failurelog.Write for a *Guard: the one warning line of a
// failed unit of work that its adapter reports (failurelog.Adapter).
func init() {
	failurelog.Write = func(guard any, ctx context.Context, msg, operation, key string, public bool, outcome string, err error, attrs ...slog.Attr) {
		guard.(*Guard).logFailure(ctx, msg, operation, key, public, outcome, err, attrs...)
	}
}

// logFailure writes the one warning line of a failed unit of work that its
// adapter reports (failurelog.Adapter): msg, the operation, the Lambda
// request id (when ctx is an invocation's), the key as its
// keyed hash (Config.KeyHashSecret) unless public (a key the platform
// assigned, such as an SQS message id, which is no caller secret), the
// outcome, attrs, and err's text with every occurrence of a secret key
// replaced by its hash. The key itself never reaches the log.
func (g *Guard) logFailure(ctx context.Context, msg, operation, key string, public bool, outcome string, err error, attrs ...slog.Attr) {
	line := []slog.Attr{slog.String("operation", operation)}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		line = append(line, slog.String("request_id", lc.AwsRequestID))
	}
	line = append(line, attrs...)
	var secret []string
	if key != "" {
		line = append(line, slog.String("key_hash", g.hash(key)))
		if !public {
			secret = []string{key}
		}
	}
	line = append(line, slog.String("outcome", outcome), slog.String("error", g.redact(err.Error(), secret)))
	g.log.LogAttrs(ctx, slog.LevelWarn, msg, line...)
}
