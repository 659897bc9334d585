package client

import "context"

// Result describes one logical call made through a Transport.
type Result struct {
	// Key is the idempotency key every attempt carried ("" for a
	// non-mutating request, which gets none).
	Key string
	// Attempts is the number of attempts made (1 when the first answer was
	// final).
	Attempts int
	// Replayed reports that the final answer carried a replay marker (see
	// Config.ReplayHeaders): the server served it from its idempotency cache
	// and did not run the operation again for this call.
	Replayed bool
}

type resultCtx struct{}

// WithResult returns a context that makes the Transport record the Result of
// the call made with it into r. r is written before RoundTrip returns; with
// redirects, it describes the last hop. Client.Do does this for you.
func WithResult(ctx context.Context, r *Result) context.Context {
	return context.WithValue(ctx, resultCtx{}, r)
}
