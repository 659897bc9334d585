package ledger

import (
	"crypto/rand"
	"encoding/base64"
	"github.com/idemkit/idemkit/ledger/identity"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/configerr"
)

// Defaults and bounds of Config and Retry, and the metric names.
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
	// DefaultMaxAttempts is the default cap on attempts per effect record.
	// Every attempt is kept in the record (one DynamoDB item, 400 KB limit);
	// 50 attempts take about 10 KB.
	DefaultMaxAttempts = 50
	// MaxMaxAttempts is the largest accepted Config.MaxAttempts.
	MaxMaxAttempts = 500
	// DefaultMaxValueBytes is the default cap on a recorded outcome value.
	DefaultMaxValueBytes = 64 << 10
	// MaxMaxValueBytes is the largest accepted Config.MaxValueBytes: the
	// record, attempts included, must stay within DynamoDB's 400 KB item.
	MaxMaxValueBytes = 300 << 10

	// Defaults of Retry.
	// DefaultRetryBase is Retry.Base's default: the first backoff.
	DefaultRetryBase = time.Second
	// DefaultRetryMax is Retry.Max's default: the backoff cap.
	DefaultRetryMax = 5 * time.Minute

	// defaultOutcomeTimeout is Config.OutcomeTimeout's default.
	defaultOutcomeTimeout = 10 * time.Second

	// Metric names (EMF, bounded dimensions only: "kind", "keying").

	// MetricSuppressions counts duplicates answered from the record without
	// firing (OpenWOP observability vocabulary).
	MetricSuppressions = "openwop.replay.effect_suppressions_total"
	// MetricReclaims counts atomic reclaims of expired claims.
	MetricReclaims = "openwop.idempotency.reclaims_total"
	// MetricStaleFence counts fire marks refused for a stale fencing token.
	MetricStaleFence = "openwop.idempotency.stale_fence_rejections_total"
	// MetricEscaped counts attempts that became escaped.
	MetricEscaped = "idemkit.ledger.escaped_total"
	// MetricStoreMisconfigured counts calls refused because the store
	// answered ErrStoreMisconfigured (a missing table, another key schema).
	MetricStoreMisconfigured = "idemkit.ledger.store_misconfigured_total"
)

// Config configures a Ledger. Validated by New.
type Config struct {
	// Store persists records. Required.
	Store Store
	// Lease is how long a claim is held before another executor may reclaim
	// it; a separate fire mark renews it, and so does every heartbeat while the
	// effect function runs (see Heartbeat). Without heartbeats it must exceed
	// the effect function's longest run. Leases are compared with the
	// reclaiming executor's clock: clock skew between executors eats into
	// the lease (keep Lease - Heartbeat well above the worst skew). With
	// heartbeats, renewals that keep failing cancel the effect function's
	// context before the lease last written ends (see Heartbeat), as late
	// as the renewal margin before it (a stalled renewal): while renewals
	// fail, a skew above that margin lets a reclaimer fire while the
	// function's context is live. Default
	// DefaultLease (5m); minimum 1s; below Retention.
	Lease time.Duration
	// Heartbeat is the interval at which the lease of a fired attempt is
	// renewed while the effect function runs: a write fenced on the owner
	// token, attempt and state (and the fencing token, if any) setting the
	// lease to now+Lease. A renewal the store refuses means the claim was
	// reclaimed: heartbeats stop, the context passed to the effect function
	// is cancelled with cause ErrLeaseLost, and the outcome write is refused
	// as well (Do returns ErrLeaseLost). A renewal that fails with an error
	// (a store outage, throttling past the SDK's retries, a timeout) is
	// retried at the next tick only while that tick (now + Heartbeat) comes
	// before the end of the lease last written (the fire's, then each
	// renewal's); otherwise the heartbeat gives up: it stops, the effect
	// function's context is cancelled with cause ErrLeaseLost before that
	// lease ends. An error the function then returns is not recorded: Do
	// returns ErrLeaseLost, and the attempt stays firing, as after a
	// refused renewal; once its lease ends, the next executor reclaims it
	// as escaped and fires with the same provider key. An error wrapping
	// ErrNotSent (the request never left) is the exception: it is
	// recorded as ever, the attempt released, and Do returns it. A success it still
	// returns is recorded, fenced as every outcome (the effect fired, and
	// the record keeps others from firing it again); Do then returns it,
	// or ErrLeaseLost when the write is refused (another executor reclaimed
	// the attempt first) or fails. So the context of an effect function
	// whose renewals fail ends before another executor may reclaim its
	// attempt (the function must honour it). Each renewal's store call is
	// bounded by a margin before that lease end (a quarter of Heartbeat,
	// at most a second), so a store that hangs fails the renewal while the
	// lease holds rather than delay the check, however short the lease (only
	// a tick that came after that margin, after a pause, still gets a
	// second). With the
	// default (Lease/3) one failed renewal is retried and the second in a
	// row gives up; with Heartbeat at Lease/2 or more the first failure
	// gives up. An effect function shorter than Heartbeat costs no extra
	// round trip. Default Lease/3; must be below Lease less that margin
	// (the first renewal must have time to land); negative: no heartbeat.
	Heartbeat time.Duration
	// MaxAttempts caps the attempts kept in an effect record (the record is
	// one DynamoDB item, limited to 400 KB). Once an effect has MaxAttempts
	// attempts and none of them recorded an outcome, Do fires nothing more
	// and returns *AttemptsExhaustedError (a stalled last attempt is first
	// closed as escaped or released, so the witness stays honest). The cap
	// is recorded on each record when Do creates it (Record.MaxAttempts),
	// so an operator's Ledger with another MaxAttempts (`idemkit effects`)
	// sees the one the executors stop at. Default DefaultMaxAttempts (50);
	// range 1..MaxMaxAttempts.
	MaxAttempts int
	// MaxValueBytes caps the size of a successful effect's value kept in the
	// record. A larger value is returned to the caller that ran the effect
	// but not recorded: the outcome (success) is, with Outcome.Dropped, and a
	// duplicate gets Result.ValueDropped with no Value. (Recording it would
	// fail on DynamoDB's 400 KB item limit AFTER the provider call, leaving
	// the effect to be fired again.) Default DefaultMaxValueBytes (64 KiB);
	// range 1..MaxMaxValueBytes.
	MaxValueBytes int
	// OutcomeTimeout bounds each write Do (and FireOnce) makes on an
	// attempt's behalf whatever its caller's context: the outcome of an
	// effect function that returned (and, under a RetainingFencer, the
	// request to keep the fence's pass as long as an escaped attempt's
	// record, just before it), and the release of a claim whose function
	// was not called (a claim or fire mark whose answer was lost, a
	// caller's context that ended before the call). These writes are
	// detached from the caller's context, whose cancellation or deadline
	// does not cut them (an effect that ran must have its outcome
	// recorded), and each runs under its own deadline of OutcomeTimeout,
	// so a store that hangs fails the write then instead of holding Do
	// until the invocation ends. An outcome not written leaves the
	// attempt firing: Do returns the store's error, and once the lease
	// ends the next Do reclaims the attempt as escaped and fires with the
	// same provider key. A release not written leaves the claim to expire
	// with its lease. It also bounds a claim's (or reclaim's) store call
	// once the caller's context ended, cancelled or past its deadline:
	// that call is not cut by it but waits for its answer, at most
	// OutcomeTimeout more, so that a claim that lands is given back after
	// it, never before (RED_TEAM 534, 560). Default (0) 10 s; must not be
	// negative.
	OutcomeTimeout time.Duration
	// WitnessDuplicates makes a suppressed duplicate coming from a run that
	// neither created the effect record nor made an attempt at it write a
	// run reference (one idempotent PutItem), so that run's witness lists the
	// effect with its recorded attempts. It costs that duplicate one extra
	// round trip (2 instead of 1), every time such a run is suppressed.
	// Attempts made by a run always write the reference (see Do). Default
	// false: a duplicate costs one round trip and is visible only in the
	// witness of the runs that created or attempted the effect, and in
	// MetricSuppressions.
	WitnessDuplicates bool
	// Retention is how long a record is kept (TTL, and inside every
	// condition). Default and minimum MinRetention (14 days).
	Retention time.Duration
	// Wait bounds how long Do waits for a live claim held elsewhere before
	// returning *InFlightError. Default DefaultWait (5s); negative: never wait.
	Wait time.Duration
	// PollInterval is the re-read interval while waiting. Default
	// DefaultPollInterval (100ms), which 0 or a negative value also means.
	PollInterval time.Duration
	// Clock is Test.Clock under its former name, read by New when
	// Test.Clock is nil. Default nil.
	//
	// Deprecated: set Test.Clock; a production Ledger keeps the system
	// clock.
	Clock Clock
	// Fencer, if set, supplies a fencing token checked on the fire mark (see
	// Fencer), which is then a write of its own between the claim and the
	// call (3 round trips for a first effect). Default nil: unfenced, and
	// the claim is the fire mark (2 round trips; an executor that dies
	// after its claim leaves an escaped attempt, see Do).
	Fencer Fencer
	// Metrics receives the counters (see the Metric… names), for example an
	// *emf.Recorder. Default nil: no metrics.
	Metrics Metrics
	// Logger receives the one line the Ledger logs itself: that its store's
	// table is missing or has another key schema (ErrStoreMisconfigured),
	// once. Default: slog JSON lines on stderr.
	Logger *slog.Logger
	// TracerProvider receives a span per claim, provider call and record
	// (OpenTelemetry API; each with the keying, the attempt and the
	// outcome, never the effect id). Default nil: no spans, and no
	// allocation or work spent on them. To use the provider installed
	// globally, pass otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Test holds the hooks only tests set. Default zero.
	Test TestConfig
}

// TestConfig holds a Ledger's hooks for tests; production leaves it zero.
type TestConfig struct {
	// Clock tells the time, paces the waits for a live claim and ticks the
	// heartbeats (see Clock). Read once, by New. Default: the system clock.
	Clock Clock
	// Jitter randomizes a retry backoff d (see Retry). Default: "equal
	// jitter", d/2 plus a uniform random part of d/2. Tests inject a
	// deterministic one.
	Jitter func(d time.Duration) time.Duration
}

// Ledger runs effects exactly-once in effect over a Store. Safe for
// concurrent use. Make one with New: the zero value is not usable.
type Ledger struct {
	cfg    Config
	tracer trace.Tracer
	// storeWarned is set once ErrStoreMisconfigured has been logged.
	storeWarned atomic.Bool
}

// New validates cfg, applies defaults and returns a Ledger, or an error
// listing every problem of cfg (matching ErrConfig).
func New(cfg Config) (*Ledger, error) {
	var p configerr.List
	if cfg.Store == nil {
		p.Addf("Config.Store is required")
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Lease < time.Second {
		p.Addf("Config.Lease %s is below 1s", cfg.Lease)
	}
	if cfg.Retention == 0 {
		cfg.Retention = MinRetention
	}
	if cfg.Retention < MinRetention {
		p.Addf("Config.Retention %s is below the 14-day minimum", cfg.Retention)
	}
	if cfg.Lease >= cfg.Retention && cfg.Retention >= MinRetention {
		// A lease outliving its record: once the record expired, a new
		// claim would fire again while the first owner's call ran.
		p.Addf("Config.Lease %s is not below Config.Retention %s", cfg.Lease, cfg.Retention)
	}
	if f, ok := cfg.Fencer.(RetainingFencer); ok && f.FenceRetention() < cfg.Retention {
		p.Addf("Config.Fencer keeps a passed token %s, less than Config.Retention %s: an escaped effect could be fired again while its record is kept", f.FenceRetention(), cfg.Retention)
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = cfg.Lease / 3
	}
	if cfg.Heartbeat >= cfg.Lease {
		p.Addf("Config.Heartbeat %s is not below Config.Lease %s", cfg.Heartbeat, cfg.Lease)
	} else if cfg.Heartbeat > 0 && cfg.Heartbeat+clock.RenewMargin(cfg.Heartbeat) >= cfg.Lease {
		p.Addf("Config.Heartbeat %s leaves no time to renew Config.Lease %s: a renewal must end %s before the lease does", cfg.Heartbeat, cfg.Lease, clock.RenewMargin(cfg.Heartbeat))
	}
	if cfg.OutcomeTimeout == 0 {
		cfg.OutcomeTimeout = defaultOutcomeTimeout
	}
	if cfg.OutcomeTimeout < 0 {
		p.Addf("Config.OutcomeTimeout %s is negative", cfg.OutcomeTimeout)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxAttempts < 1 || cfg.MaxAttempts > MaxMaxAttempts {
		p.Addf("Config.MaxAttempts %d is outside 1..%d", cfg.MaxAttempts, MaxMaxAttempts)
	}
	if cfg.MaxValueBytes == 0 {
		cfg.MaxValueBytes = DefaultMaxValueBytes
	}
	if cfg.MaxValueBytes < 1 || cfg.MaxValueBytes > MaxMaxValueBytes {
		p.Addf("Config.MaxValueBytes %d is outside 1..%d", cfg.MaxValueBytes, MaxMaxValueBytes)
	}
	if err := p.Err("ledger", ErrConfig); err != nil {
		return nil, err
	}
	if cfg.Test.Clock == nil {
		cfg.Test.Clock = cfg.Clock
	}
	if cfg.Test.Clock == nil {
		cfg.Test.Clock = clock.System{}
	}

	if cfg.Test.Jitter == nil {
		cfg.Test.Jitter = equalJitter
	}
	return &Ledger{cfg: cfg, tracer: tracer(cfg.TracerProvider)}, nil
}

func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("ledger: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (l *Ledger) count(name string, k identity.Kind, keying identity.Keying) {
	if l.cfg.Metrics == nil {
		return
	}
	dims := map[string]string{"kind": string(k)}
	if keying != "" {
		dims["keying"] = string(keying)
	}
	l.cfg.Metrics.Count(name, 1, dims)
}

// now returns the clock truncated to milliseconds, the precision the stores
// keep, so a record read back compares equal to the one written.
func (l *Ledger) now() time.Time { return l.cfg.Test.Clock.Now().UTC().Truncate(time.Millisecond) }
