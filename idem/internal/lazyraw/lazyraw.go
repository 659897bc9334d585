// Package lazyraw lets the Guard leave a claim's raw body hash
// (Record.RawBodySHA256, kept for archive) to the in-memory store, which
// decides a claim before it writes and so can take the hash only for a
// claim that writes: a replay then does not hash the request body a second
// time. It is a handshake through the claim's context, not a Store method,
// so that the public Store contract is unchanged: every claim's record
// carries the hash, unless the store proved that it takes it lazily.
//
// The Guard hands each Claim a *Call through the call's context (Key). A
// store that honours it (memstore) answers it as itself (Call.Answer); once the
// Guard sees its own Config.Store there (not a wrapper around the store,
// which may make its own Claim), its later claims set Lazy and leave the
// record's RawBodySHA256 empty, and the store takes Raw's value when, and
// only when, it writes the record.
package lazyraw

import (
	"context"
	"sync/atomic"
)

// Key is the context key under which a Claim's context carries its *Call.
type Key struct{}

// Source gives a claim's raw body hash (the lowercase hex SHA-256 of the
// raw request body, "" for none). The first call may hash the body.
type Source interface {
	RawBodySHA256() string
}

// Call is what the Guard hands a store's Claim through its context. A
// store may read it after Claim returned (a wrapper that left the call
// running on another goroutine): Lazy and Raw are set before the first
// claim and never written again, and the answer is atomic.
type Call struct {
	// Lazy says the record's RawBodySHA256 is not set: Raw gives it, asked
	// at most once, before Claim returns, and only when the claim writes
	// the record (Claimed or Reclaimed).
	Lazy bool
	Raw  Source
	// answer is the token of the store that honours Lazy (Answer).
	answer atomic.Pointer[Token]
}

// Token is what a store that honours Lazy answers with: Store is the store
// itself, set once when the store is made.
type Token struct{ Store any }

// Answer records that the store whose token t is honours Lazy.
func (c *Call) Answer(t *Token) { c.answer.Store(t) }

// AnsweredBy reports whether store itself answered the call.
func (c *Call) AnsweredBy(store any) bool {
	t := c.answer.Load()
	return t != nil && t.Store == store
}

// From returns the Call ctx carries, or nil.
func From(ctx context.Context) *Call {
	c, _ := ctx.Value(Key{}).(*Call)
	return c
}
