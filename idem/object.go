package idem

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// What a replay renders: the response the key's first execution returned
// (the default), or the object that execution created, as it is now (the
// commerce policy: a key binds one Action, and a replay answers that
// Action in its current status). The policy says which (Policy.Replay); a
// route says how its object is loaded (Request.Object).

// ReplayRender is what a policy's replays render (Policy.Replay).
type ReplayRender int

const (
	// ReplayResponse replays the stored response byte for byte (with the
	// policy's headers): the OpenWOP default and the ERP policy.
	ReplayResponse ReplayRender = iota
	// ReplayObject renders, on a route that loads its object
	// (Request.Object), the current state of the object the key's first
	// execution created: a settled object is answered with the stored
	// status and headers and the object as it is now; an object still
	// pending is waited on as the request's wait mode says
	// (InFlightAnswer.ModeHeader: sync up to the call's budget, async not at
	// all), then answered 202 Accepted with Retry-After and the object as
	// it is. Every such answer carries the policy's replay headers. On a
	// route without Object, and where Object renders nothing, the stored
	// response is replayed as under ReplayResponse.
	ReplayObject
)

// ObjectLoader loads the object a key's first execution created, for a
// policy whose replays render it (ReplayObject). first is the record's
// claim (its ID and the first request's id, from which a handler that
// derives the object's id from its claim finds it again); stored is the
// response the first execution returned, or nil while that execution is
// still running (an async duplicate of an in-flight request). The loader
// returns the object's current answer, or a zero ObjectState (nil
// Response) when there is no object to render (a stored error answer): the
// stored response is then replayed. An error is logged and the stored
// response replayed (or, with none, the in-flight answer). With stored
// nil, a loader renders only an object that exists: the first execution
// may yet create none, and a duplicate told an object that is never
// created holds a link that never resolves; with nothing rendered, the
// duplicate gets the policy's pending answer, which names none.
type ObjectLoader func(ctx context.Context, first ClaimInfo, stored *Response) (ObjectState, error)

// ObjectState is an object's current answer (ObjectLoader).
type ObjectState struct {
	// Response is the object as it is now: its status, headers and body
	// (a settled object's status and headers are replaced by the stored
	// response's, so a replay keeps the first answer's shape). nil: no
	// object to render.
	Response *Response
	// Settled reports whether the object reached a final status
	// (completed, failed, cancelled): nothing will change it any more.
	Settled bool
}

// replayObject answers a replay (stored != nil) or an async duplicate of a
// pending record (stored == nil) from the route's object, waiting on an
// unsettled one for up to budget: the time slept on the Guard's clock, and
// never past the context's deadline less WaitMargin (as inspect waits); ok
// is false when the object renders nothing and the caller answers as for a
// stored response.
func (t *txn) replayObject(ctx context.Context, rec *Record, stored *Response, budget time.Duration) (*Response, bool) {
	load := t.in.object
	if t.g.cfg.Policy.Replay != ReplayObject || load == nil {
		return nil, false
	}
	first := ClaimInfo{ID: t.id, Attempt: rec.Attempt, OriginalRequestID: rec.RequestID}
	backoff := 20 * time.Millisecond
	for {
		st, err := load(ctx, first, stored)
		if err != nil {
			t.logf(ctx, slog.LevelWarn, "idempotency: object load failed; replaying the stored response", t.errText(err))
			return nil, false
		}
		if st.Response == nil {
			return nil, false
		}
		rem := budget
		if left, ok := clock.Remaining(ctx); ok {
			rem = min(rem, left-t.g.cfg.WaitMargin)
		}
		if st.Settled || rem <= 0 {
			return t.objectAnswer(st, rec, stored), true
		}
		d := min(backoff, rem)
		d = max(d/2+rand.N(d/2+1), 1) // never 0: the budget always shrinks
		budget -= d
		if t.g.clock.Sleep(ctx, d) != nil {
			return t.objectAnswer(st, rec, stored), true
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// objectAnswer is the answer for an object's state: settled, the stored
// status and headers with the object's body, less the stored body's own
// validators (bodyValidator: its Content-Length, ETag and digests
// describe other bytes; the object's own are kept); pending, 202 with
// Retry-After.
func (t *txn) objectAnswer(st ObjectState, rec *Record, stored *Response) *Response {
	o := st.Response
	out := &Response{Status: o.Status, Body: o.Body, Headers: make(map[string][]string, len(o.Headers)+4)}
	for k, v := range o.Headers {
		out.Headers[k] = v
	}
	if st.Settled && stored != nil {
		out.Status = stored.Status
		for k, v := range stored.Headers {
			if bodyValidator(k) == validatorNone {
				out.Headers[k] = v
			}
		}
		if ct := o.Headers["Content-Type"]; len(ct) > 0 {
			out.Headers["Content-Type"] = ct
		}
	}
	if !st.Settled {
		out.Status = 202
		out.Headers[HeaderRetryAfter] = []string{strconv.Itoa(t.g.retryAfter(rec, t.g.clock.Now()))}
	}
	return t.decorate(t.render(out), true, rec.RequestID)
}
