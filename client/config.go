package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/configerr"
)

// Config configures a Transport. The zero value is usable: every field's
// default is stated in its comment.
type Config struct {
	// Base performs each attempt. Default http.DefaultTransport.
	Base http.RoundTripper

	// MaxAttempts bounds the attempts of one logical call, the first one
	// included. Default 5. 1 disables retries (the key is still sent; the
	// in-flight polls below still happen). A 409 in-flight answer (or the
	// commerce policy's pending 202) that carries Retry-After does not count: the server is running the request
	// under this key and says when to look again, so such polls are bounded
	// by MaxElapsed (and the context) only. Through Client.Do the hops of a
	// 307/308 redirect share it: a hop reached with no attempts left makes
	// one attempt and no retries.
	MaxAttempts int

	// MaxElapsed bounds one logical call, from the start of its first
	// attempt until response headers arrive: no wait is started that would
	// end past it, and an attempt still waiting for headers when it runs out
	// is cancelled (as is the reading of a 409's or 5xx's body for its error
	// code: such an answer broken off never arrived whole). An answer that
	// arrived is delivered even if the budget runs out before the Transport
	// hands it over. Default 30s. Through Client.Do it runs from the first
	// hop of a redirected call, and a hop reached after it makes no attempt.
	// The request context's deadline and http.Client.Timeout bound the call
	// too, whichever is sooner.
	MaxElapsed time.Duration

	// BaseDelay is the backoff before the second attempt; it doubles for each
	// further attempt up to MaxDelay. The wait is "equal jitter": a uniformly
	// random duration in [d/2, d). When the answer carried Retry-After, the
	// wait is the larger of that backoff and Retry-After plus a jitter of up
	// to min(BaseDelay, Retry-After/10). Default 200ms.
	BaseDelay time.Duration

	// MaxDelay caps the exponential backoff. It does not cap Retry-After: a
	// server's Retry-After is always honoured, or the call ends with that
	// answer when the wait does not fit in the budget. Default 5s.
	MaxDelay time.Duration

	// KeyHeader is the request header that carries the idempotency key.
	// Default "Idempotency-Key".
	KeyHeader string

	// NewKey mints the key of a logical call that has none.
	// Default NewKey (a canonical UUIDv4).
	NewKey func() string

	// ReplayHeaders are the response headers whose value "true" (any case)
	// marks an answer served from the server's idempotency cache; an
	// empty, non-nil list recognises none. Default
	// {"OpenWOP-Idempotent-Replay", "Idempotency-Replayed", "Idempotent-Replayed"}
	// (the spellings of the OpenWOP default policy, the ERP policy and the
	// commerce platform's policy).
	ReplayHeaders []string

	// InFlightCodes are the error codes (the envelope's "error" field, or a
	// "code" field) of a 409 that means "the same key is being processed;
	// retry later" (an empty, non-nil list: none). Any other 409 is final. Default
	// {"idempotency_in_flight", "IDEMPOTENCY_REQUEST_IN_PROGRESS"}.
	InFlightCodes []string

	// Now is the clock used for budgets and HTTP-date Retry-After values.
	// Default time.Now.
	Now func() time.Time

	// Sleep waits d or until ctx ends, returning ctx.Err() in the latter
	// case. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error

	// Rand returns a uniformly distributed float in [0, 1) for jitter.
	// Default math/rand/v2.Float64. It must be safe for concurrent use.
	Rand func() float64
}

// Defaults of Config.
const (
	DefaultMaxAttempts = 5
	DefaultMaxElapsed  = 30 * time.Second
	DefaultBaseDelay   = 200 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
	DefaultKeyHeader   = "Idempotency-Key"
)

// DefaultReplayHeaders are the replay-marker headers recognised by default.
var DefaultReplayHeaders = []string{"OpenWOP-Idempotent-Replay", "Idempotency-Replayed", "Idempotent-Replayed"}

// DefaultInFlightCodes are the retryable 409 codes recognised by default.
var DefaultInFlightCodes = []string{"idempotency_in_flight", "IDEMPOTENCY_REQUEST_IN_PROGRESS"}

// ErrConfig is matched (errors.Is) by every error Validate returns.
var ErrConfig = errors.New("client: invalid config")

// Validate reports every field that is out of range, all in one error
// ("client: invalid config: p1; p2", matching ErrConfig). Zero values are
// valid (they select the defaults).
func (c Config) Validate() error {
	var l configerr.List
	if c.MaxAttempts < 0 {
		l.Addf("MaxAttempts %d < 0", c.MaxAttempts)
	}
	if c.MaxElapsed < 0 {
		l.Addf("MaxElapsed %v < 0", c.MaxElapsed)
	}
	if c.BaseDelay < 0 {
		l.Addf("BaseDelay %v < 0", c.BaseDelay)
	}
	if c.MaxDelay < 0 {
		l.Addf("MaxDelay %v < 0", c.MaxDelay)
	}
	if c.BaseDelay > 0 && c.MaxDelay > 0 && c.MaxDelay < c.BaseDelay {
		l.Addf("MaxDelay %v < BaseDelay %v", c.MaxDelay, c.BaseDelay)
	}
	return l.Err(ErrConfig.Error(), ErrConfig)
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Base == nil {
		c.Base = http.DefaultTransport
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxElapsed == 0 {
		c.MaxElapsed = DefaultMaxElapsed
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = max(DefaultMaxDelay, c.BaseDelay)
	}
	if c.KeyHeader == "" {
		c.KeyHeader = DefaultKeyHeader
	}
	if c.NewKey == nil {
		c.NewKey = NewKey
	}
	if c.ReplayHeaders == nil {
		c.ReplayHeaders = DefaultReplayHeaders
	}
	if c.InFlightCodes == nil {
		c.InFlightCodes = DefaultInFlightCodes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = clock.Sleep
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}
