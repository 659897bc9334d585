package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
)

// StreamFunc performs a streamed effect: it calls the provider with
// call.ProviderKey and copies the response body to w as it arrives (e.g.
// server-sent events relayed to the client). Its error is classified as
// for Func (NotSent, Uncertain, or a recorded failure).
type StreamFunc func(ctx context.Context, call Call, w io.Writer) error

// DoStream is Do for an effect whose response body is streamed (OpenWOP
// Layer 2 "Streaming"): the body is never cached in the ledger. The request
// (Effect.RequestDigest and SemanticRecipe, when set) is recorded with the
// claim, and the final outcome (success, or the failure message) is recorded
// with the body's metadata only: its SHA-256 and length (Result.BodyDigest,
// Result.BodySize, Outcome.BodyDigest, Outcome.BodySize).
//
// Only the attempt that fires writes to w. A duplicate (Result.Replayed)
// writes nothing to w and gets the recorded outcome and body metadata, never
// the body: the caller answers it without the stream (for example by
// reporting the completed effect). All other guarantees are those of Do:
// one claim, the same provider key on every attempt, fenced writes, bounded
// waiting, reclaim of a stalled attempt as escaped, MismatchError for a
// different request under the same identity. Effect.Streamed is implied.
//
// One difference: a nil returned by fn after its context ended is not a
// success, since the context's end may have cut the body. When the
// heartbeat gave up (its renewals failed until the lease could end) and
// cancelled fn's context, nothing is recorded; DoStream returns
// ErrLeaseLost and the attempt is reclaimed as escaped after its lease.
// When ctx itself ended (the caller's cancellation or deadline, whatever
// its cause, ErrLeaseLost of an outer effect function included), the
// attempt ends as if fn had returned ErrUncertain, whether fn returned nil
// or an error (unless fn classified it NotSent or Uncertain itself):
// released as escaped, the next DoStream fires again under the same
// provider key, and DoStream returns an error matching ErrUncertain, ctx's
// error and its cause, and fn's error if any.
func (l *Ledger) DoStream(ctx context.Context, eff Effect, w io.Writer, fn StreamFunc) (Result, error) {
	if fn == nil {
		return Result{}, errors.New("ledger: nil stream function")
	}
	if w == nil {
		return Result{}, errors.New("ledger: nil stream writer")
	}
	eff.Streamed = true
	caller := ctx
	return l.do(ctx, eff, func(ctx context.Context, c Call) (produced, error) {
		h := sha256.New()
		cw := &countingWriter{w: w, h: h}
		err := fn(ctx, c, cw)
		if caller.Err() != nil {
			// The caller's context ended while fn relayed the body: a
			// relay that stops with its context, saying nothing (nil) or
			// why (its context's error), did not relay the whole body,
			// so neither a success nor a failure is recorded for it
			// (either would carry the cut body's digest and size).
			err = cutByCaller(caller, err, "the stream function returned after its caller's context ended (%w), so its body may be cut")
		}
		return produced{bodyDigest: hex.EncodeToString(h.Sum(nil)), bodySize: cw.n, relayed: true}, err
	})
}

// countingWriter forwards to w while hashing and counting what w accepted.
type countingWriter struct {
	w io.Writer
	h io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		_, _ = c.h.Write(p[:n])
		c.n += int64(n)
	}
	return n, err
}
