package fence

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/ledger"
)

// MetricStaleFence counts point-of-no-return writes rejected for a stale
// token (OpenWOP observability vocabulary; dimensions "kind" and "region").
const MetricStaleFence = ledger.MetricStaleFence

// DefaultRetention is the default fence-item retention: the ledger's minimum
// retention plus one day, so a fence outlives the effect record it guards.
const DefaultRetention = ledger.MinRetention + 24*time.Hour

// Config configures an Owner. Validated by New.
type Config struct {
	// Store is the linearizable fence store. Required.
	Store Store
	// Region is the region this executor runs in, recorded with a passing
	// token and used as a metric dimension. Default "" (not recorded).
	Region string
	// Retention is how long a fence item is kept after its last token, or
	// its last token refused because one passed (or longer, when the
	// ledger asks it to keep the item as long as an escaped attempt's
	// record: Owner.Keep). It must be at least the
	// ledger's Config.Retention (ledger.New refuses a shorter one). Default
	// DefaultRetention (15 days); minimum ledger.MinRetention.
	Retention time.Duration
	// Now is the clock. Default the system clock.
	Now func() time.Time
	// Metrics receives MetricStaleFence (for example an *emf.Recorder).
	// Default nil: no metrics.
	Metrics ledger.Metrics
}

// Owner is the linearizable fence owner. It implements ledger.Fencer; wrap
// every fenced effect function with Guard. Safe for concurrent use.
type Owner struct {
	cfg Config
}

var _ ledger.RetainingFencer = (*Owner)(nil)

// ErrConfig is matched (errors.Is) by every error New returns: one error
// listing every problem of the Config.
var ErrConfig = errors.New("fence: invalid config")

// New validates cfg, applies defaults and returns an Owner, or an error
// listing every problem of cfg (matching ErrConfig).
func New(cfg Config) (*Owner, error) {
	var p configerr.List
	if cfg.Store == nil {
		p.Addf("Config.Store is required")
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Retention < ledger.MinRetention {
		p.Addf("Config.Retention %s is below the ledger's 14-day minimum", cfg.Retention)
	}
	if err := p.Err("fence", ErrConfig); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = clock.System{}.Now
	}
	return &Owner{cfg: cfg}, nil
}

// FenceRetention implements ledger.RetainingFencer: how long a fence item
// is kept after its last token or refused token (Config.Retention).
// ledger.New refuses a ledger Config.Retention longer than this.
func (o *Owner) FenceRetention() time.Duration { return o.cfg.Retention }

func (o *Owner) now() time.Time { return o.cfg.Now().UTC().Truncate(time.Millisecond) }

// Token implements ledger.Fencer: one conditional UpdateItem on the fence
// store issues a token strictly greater than every token issued before for
// effectID (also across a deleted, expired item: the seed is the clock in
// milliseconds << 10). It fails with an error matching *IssuedError
// (errors.As) once a token has passed the effect's point of no return.
func (o *Owner) Token(ctx context.Context, effectID string) (uint64, error) {
	if effectID == "" {
		return 0, errors.New("fence: empty effect id")
	}
	now := o.now()
	seed := uint64(now.UnixMilli()) << 10
	tok, passed, err := o.cfg.Store.Acquire(ctx, effectID, seed, now, now.Add(o.cfg.Retention))
	if err != nil {
		return 0, err
	}
	if passed != nil {
		return 0, heldPass{&IssuedError{Token: passed.Token, Region: passed.Region, At: passed.At}}
	}
	return tok, nil
}

// Pass is the point-of-no-return write: it succeeds, once, for the newest
// token of effectID. Any other token gets ErrStale (counted in
// MetricStaleFence) and must not fire.
func (o *Owner) Pass(ctx context.Context, effectID string, token uint64) error {
	if token == 0 {
		return ErrUnfenced
	}
	ok, _, err := o.cfg.Store.Pass(ctx, effectID, token, o.cfg.Region, o.now())
	if err != nil {
		return err
	}
	if !ok {
		dims := map[string]string{"kind": string(identity.KindEffect)}
		if o.cfg.Region != "" {
			dims["region"] = o.cfg.Region
		}
		if o.cfg.Metrics != nil {
			o.cfg.Metrics.Count(MetricStaleFence, 1, dims)
		}
		return ErrStale
	}
	return nil
}

// Reopen implements ledger.ReopeningFencer: it forgets that token passed
// effectID's point of no return (an operator resolved the escaped attempt
// holding it as not delivered), so the next Token is issued and that
// attempt is fenced like any other. Nothing to forget (no token passed) is
// not an error; token is then retired all the same when it is the newest
// issued, so an attempt that stalled before its pass never passes after it
// was settled. Another token having passed is an *IssuedError.
func (o *Owner) Reopen(ctx context.Context, effectID string, token uint64) error {
	ok, cur, err := o.cfg.Store.Reopen(ctx, effectID, token)
	if err != nil {
		return err
	}
	if !ok {
		e := &IssuedError{}
		if cur != nil && cur.Passed != nil {
			e.Token, e.Region, e.At = cur.Passed.Token, cur.Passed.Region, cur.Passed.At
		}
		return e
	}
	return nil
}

// Keep implements ledger.RetainingFencer: it makes the fence keep effectID's
// item, and so the pass of token if it passed, at least until until (one
// conditional write on the fence store, never shortening the item's
// retention). It fails with ErrNotKept when the item is absent, past its
// retention, or holds a newer token than token.
func (o *Owner) Keep(ctx context.Context, effectID string, token uint64, until time.Time) error {
	ok, err := o.cfg.Store.Keep(ctx, effectID, token, o.now(), until)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotKept
	}
	return nil
}

// Guard returns fn preceded by the point-of-no-return write: Ledger.Do calls
// the returned function after its fire mark, and it calls Pass with the
// call's fencing token, immediately before fn reaches the provider. When Pass
// refuses (stale token) or cannot be made (e.g. the fence owner is
// unreachable), fn is not called and the error is wrapped with
// ledger.NotSent, so the ledger releases the attempt unfired and records
// nothing. A Ledger without this Owner as its Fencer gets ErrUnfenced.
//
// An error from Pass that leaves its outcome unknown (a timeout after the
// write was sent) is also treated as not sent: fn was not called. If the
// write did apply, the token passed with no fire; the ledger's next
// attempt finds its last fire-marked attempt released, not sent, and
// reopens the fence for that token (Reopen) before it takes its own, as
// after any attempt whose function returned NotSent.
func (o *Owner) Guard(fn ledger.Func) ledger.Func {
	return func(ctx context.Context, call ledger.Call) ([]byte, error) {
		if err := o.Pass(ctx, call.EffectID, call.Fence); err != nil {
			return nil, ledger.NotSent(err)
		}
		return fn(ctx, call)
	}
}
