package idem

import (
	"context"
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
	info   ClaimInfo
	mu     sync.Mutex
	writes []any
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
	c.writes = append(c.writes, writes...)
	c.mu.Unlock()
	return nil
}

func (c *claimState) takeWrites() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}
