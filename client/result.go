package client

import (
	"context"
	"time"
)

// Result describes one logical call made through a Transport.
type Result struct {
	// Key is the idempotency key every attempt carried ("" for a
	// non-mutating request, which gets none).
	Key string
	// Attempts is the number of attempts made (1 when the first answer was
	// final). Through Client.Do it counts the attempts of every redirect hop.
	Attempts int
	// Replayed reports that the final answer carried a replay marker (see
	// Config.ReplayHeaders): the server served it from its idempotency cache
	// and did not run the operation again for this call. Under the commerce
	// policy a 202 so marked is the first request's action not yet settled
	// (or, asked for with Idempotency-Mode: async, its pending answer).
	Replayed bool
}

type resultCtx struct{}

// WithResult returns a context that makes the Transport record the Result of
// the call made with it into r. r is written before RoundTrip returns. Through
// a plain http.Client that follows a redirect, r describes the last hop only,
// and a minted key is not carried to the new location (set one with WithKey
// when a mutating request can be redirected). Client.Do does this for you and
// links the hops: one key for the whole call, Attempts counting every hop.
func WithResult(ctx context.Context, r *Result) context.Context {
	return context.WithValue(ctx, resultCtx{}, r)
}

type callCtx struct{}

// callState is shared by the hops (redirects) of one Client.Do call, which
// http.Client makes one after the other.
type callState struct {
	key      string    // the key of the call, once a mutating hop chose it
	attempts int       // attempts of the hops so far
	polls    int       // in-flight polls among them (not counted by MaxAttempts)
	start    time.Time // start of the first mutating hop: MaxElapsed runs from it
	replayed bool      // a hop's final answer carried a replay marker
}
