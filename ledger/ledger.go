package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/internal/emf"
)

// Defaults and bounds of Config.
const (
	// DefaultLease is the default claim lease.
	DefaultLease = 5 * time.Minute
	// MinRetention is the shortest retention accepted: 14 days (OpenWOP
	// Layer 2 "Retention").
	MinRetention = 14 * 24 * time.Hour
	// DefaultWait is the default bounded wait for a live claim held elsewhere.
	DefaultWait = 5 * time.Second
	// DefaultPollInterval is the default re-read interval while waiting.
	DefaultPollInterval = 100 * time.Millisecond
)

// Metric names (EMF, bounded dimensions only: "kind", "keying").
const (
	// MetricSuppressions counts duplicates answered from the record without
	// firing (OpenWOP observability vocabulary).
	MetricSuppressions = "openwop.replay.effect_suppressions_total"
	// MetricReclaims counts atomic reclaims of expired claims.
	MetricReclaims = "openwop.idempotency.reclaims_total"
	// MetricStaleFence counts fire marks refused for a stale fencing token.
	MetricStaleFence = "openwop.idempotency.stale_fence_rejections_total"
	// MetricEscaped counts attempts that became escaped.
	MetricEscaped = "idemkit.ledger.escaped_total"
)

// Config configures a Ledger. Validated by New.
type Config struct {
	// Store persists records. Required.
	Store Store
	// Lease is how long a claim is held before another executor may reclaim
	// it; the fire mark renews it. It must exceed the effect function's
	// longest run. Default DefaultLease (5m); minimum 1s.
	Lease time.Duration
	// Retention is how long a record is kept (TTL, and inside every
	// condition). Default and minimum MinRetention (14 days).
	Retention time.Duration
	// Wait bounds how long Do waits for a live claim held elsewhere before
	// returning *InFlightError. Default DefaultWait (5s); negative: never wait.
	Wait time.Duration
	// PollInterval is the re-read interval while waiting. Default
	// DefaultPollInterval (100ms).
	PollInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Sleep pauses while waiting. Default: a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Fencer, if set, supplies a fencing token checked on the fire mark (see
	// Fencer). Default nil: unfenced.
	Fencer Fencer
	// Metrics receives the counters. Default nil: no metrics.
	Metrics *emf.Recorder
	// NewToken mints owner tokens. Default: 128 random bits, base64url.
	NewToken func() string
}

// Ledger runs effects exactly-once in effect over a Store. Safe for
// concurrent use.
type Ledger struct {
	cfg Config
}

// New validates cfg, applies defaults and returns a Ledger.
func New(cfg Config) (*Ledger, error) {
	if cfg.Store == nil {
		return nil, errors.New("ledger: Config.Store is required")
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Lease < time.Second {
		return nil, fmt.Errorf("ledger: Config.Lease %s is below 1s", cfg.Lease)
	}
	if cfg.Retention == 0 {
		cfg.Retention = MinRetention
	}
	if cfg.Retention < MinRetention {
		return nil, fmt.Errorf("ledger: Config.Retention %s is below the 14-day minimum", cfg.Retention)
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.NewToken == nil {
		cfg.NewToken = newToken
	}
	return &Ledger{cfg: cfg}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("ledger: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (l *Ledger) count(name string, k Kind, keying Keying) {
	dims := map[string]string{"kind": string(k)}
	if keying != "" {
		dims["keying"] = string(keying)
	}
	l.cfg.Metrics.Count(name, 1, dims)
}

// now returns the clock truncated to milliseconds, the precision the stores
// keep, so a record read back compares equal to the one written.
func (l *Ledger) now() time.Time { return l.cfg.Now().UTC().Truncate(time.Millisecond) }
