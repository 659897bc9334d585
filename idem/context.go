package idem

import (
	"context"
	"errors"
	"sync"
)

// ClaimInfo describes the claim a handler runs under.
type ClaimInfo struct {
	// ID is the record ID (never the raw key).
	ID string
	// Attempt is 1 for the first execution, +1 for every reclaim.
	Attempt int
	// Reclaimed says whether this execution took over an expired lease or
	// a retryable failure.
	Reclaimed bool
	// OriginalRequestID is the request id of the first claim.
	OriginalRequestID string
}

type claimKey struct{}

type claimState struct {
	// info is the claim; a Guard wired again around the handler (this
	// one or another) finds it by its record ID (txn.claim).
	info ClaimInfo
	mu   sync.Mutex
	// tx holds what the handler registered (Transact, TransactOr,
	// OnConflict); nil until it registers anything, so that a claim
	// without transactional writes carries one pointer for them.
	tx *claimTx
}

// claimTx is a claim's transactional registrations: its writes, the
// causes of their conditions (TransactOr, each with the writes it covers)
// and the handler's answer to a cause (OnConflict).
type claimTx struct {
	writes []any
	causes []writeCause
	answer func(cause error) *Response
}

// txLocked returns c.tx, made if needed; c.mu is held.
func (c *claimState) txLocked() *claimTx {
	if c.tx == nil {
		c.tx = &claimTx{}
	}
	return c.tx
}

// writeCause is a TransactOr registration: cause explains a failed
// condition of the writes from up to to (indices into claimTx.writes).
type writeCause struct {
	from, to int
	cause    func(ctx context.Context, index int) error
}

// FromContext returns the claim the handler runs under.
func FromContext(ctx context.Context) (ClaimInfo, bool) {
	c, ok := ctx.Value(claimKey{}).(*claimState)
	if !ok {
		return ClaimInfo{}, false
	}
	return c.info, true
}

// Transact registers store-specific business writes (for dynamostore,
// types.TransactWriteItem values) that commit in ONE transaction with the
// completion record, fenced by the claim's owner token. They commit only if
// the handler's outcome is final (2xx or a cached 4xx); for any other outcome,
// or if the fence fails because the lease was lost, nothing is written and
// the caller gets a retryable answer. So the handler's DynamoDB writes
// happen exactly once per scope. Transact returns ErrNoClaim outside a claim.
func Transact(ctx context.Context, writes ...any) error {
	c, ok := ctx.Value(claimKey{}).(*claimState)
	if !ok {
		return ErrNoClaim
	}
	c.mu.Lock()
	tx := c.txLocked()
	tx.writes = append(tx.writes, writes...)
	c.mu.Unlock()
	return nil
}

// TransactOr is Transact for writes whose own condition can fail for a
// reason the host answers itself (a uniqueness its write checks, a
// fence it set). Should the completion transaction be cancelled because
// one of writes failed its condition (the store's *WriteConflictError
// names it), the Guard calls cause with that write's index among writes,
// after the cancellation (nothing was written), on a context without the
// request's cancellation; the error it returns is handed to the answer the
// handler registered with OnConflict. A nil error, an error that answer
// does not answer, or no answer at all keeps the Guard's own answer for a
// cancelled completion: 500 internal_error, the record released. cause may
// read the store; it must not write. TransactOr returns ErrNoClaim outside
// a claim.
func TransactOr(ctx context.Context, cause func(ctx context.Context, index int) error, writes ...any) error {
	c, ok := ctx.Value(claimKey{}).(*claimState)
	if !ok {
		return ErrNoClaim
	}
	c.mu.Lock()
	tx := c.txLocked()
	from := len(tx.writes)
	tx.writes = append(tx.writes, writes...)
	if cause != nil && len(writes) > 0 {
		tx.causes = append(tx.causes, writeCause{from: from, to: len(tx.writes), cause: cause})
	}
	c.mu.Unlock()
	return nil
}

// OnConflict registers the handler's answer to the cause of a cancelled
// completion (TransactOr): answer returns the request's answer for cause,
// or nil for a cause it does not answer. The answer replaces the
// handler's response, whose writes none committed, and is recorded as
// the policy says for it (Policy.Cache: a forgotten answer deletes the
// record, a retryable one releases it, a final one is recorded, without
// any of the writes, as not kept when the store refuses it for good or,
// inside a Lambda invocation, when its payload is more than Lambda can
// return, as the handler's own response would be). The handler's response
// cookies do not go out with it. The last registration holds. It serves the
// adapters that answer with a response (Do, HTTPAPI, REST, the net/http
// middleware); under Guard.Once a cancelled completion stays
// ErrNotCommitted. OnConflict returns ErrNoClaim outside a claim.
func OnConflict(ctx context.Context, answer func(cause error) *Response) error {
	c, ok := ctx.Value(claimKey{}).(*claimState)
	if !ok {
		return ErrNoClaim
	}
	c.mu.Lock()
	c.txLocked().answer = answer
	c.mu.Unlock()
	return nil
}

// conflictAnswer is the handler's answer to the cancelled completion err
// (a *WriteConflictError) of the writes taken last (takeWrites), or nil:
// the cause registered for the failed write (TransactOr), answered by
// OnConflict's answer. A panic of either is nil, never the request's.
func (c *claimState) conflictAnswer(ctx context.Context, err error) (resp *Response, cause error) {
	var wc *WriteConflictError
	if !errors.As(err, &wc) || wc.Index < 0 {
		return nil, nil
	}
	c.mu.Lock()
	var answer func(error) *Response
	var causes []writeCause
	if c.tx != nil {
		answer, causes = c.tx.answer, c.tx.causes
	}
	var fn func(context.Context, int) error
	at := 0
	for _, w := range causes {
		if wc.Index >= w.from && wc.Index < w.to {
			fn, at = w.cause, wc.Index-w.from
			break
		}
	}
	c.mu.Unlock()
	if fn == nil || answer == nil {
		return nil, nil
	}
	defer func() {
		if recover() != nil {
			resp = nil
		}
	}()
	if cause = fn(ctx, at); cause == nil {
		return nil, nil
	}
	return answer(cause), cause
}

func (c *claimState) takeWrites() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx == nil {
		return nil
	}
	w := c.tx.writes
	c.tx.writes = nil
	return w
}
