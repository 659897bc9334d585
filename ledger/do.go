package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/ids"
)

// The bounds of Do's free-form fields, as grammars (TestFieldMatchersAgree
// holds each matcher below equal to its grammar; byte loops rather than
// compiled regular expressions, which cost every process's start).
const (
	// invocationGrammar bounds Effect.InvocationID: printable, no NUL or
	// whitespace, at most 128 characters (every attempt keeps it in the
	// record item).
	invocationGrammar = `^[A-Za-z0-9._~:/-]{1,128}$`
	// digestGrammar bounds Effect.RequestDigest (hex, base64 or "alg:value").
	digestGrammar = `^[A-Za-z0-9._~:+/=-]{1,128}$`
	// recipeGrammar bounds recipe stamps.
	recipeGrammar = `^[A-Za-z0-9._~:-]{1,64}$`
)

func validInvocation(s string) bool { return ids.Chars(s, ":/", 1, 128) }
func validDigest(s string) bool     { return ids.Chars(s, ":+/=", 1, 128) }
func validRecipe(s string) bool     { return ids.Chars(s, ":", 1, 64) }

// maxRounds bounds Do's claim/reclaim loop (apart from bounded waiting), so a
// pathological store or clock can never spin it forever.
const maxRounds = 32

// Effect is one effect to run through Do.
type Effect struct {
	// Identity is the effect's identity (identity.FromActivity or
	// identity.FromBusiness). Required.
	Identity identity.Identity
	// RunID is the run making this attempt (tenant-bound runId grammar,
	// "<tenant>/<opaque>" with an opaque part of 16..128 characters of
	// A-Z a-z 0-9 . _ ~ -, same tenant as Identity). Optional: empty for an effect reached outside a
	// run. The run that creates the record is its witness index; another
	// run that makes an attempt at it (or, with Config.WitnessDuplicates, is
	// suppressed by it) is added with a run reference, so each run's witness
	// lists the effect.
	RunID string
	// NodeID is the node making this attempt (nodeId grammar). Required when
	// RunID is set.
	NodeID string
	// InvocationID is an optional witness field, at most 128 characters of
	// [A-Za-z0-9._~:/-]; default Identity.InvocationID (the activity identity v2
	// logicalInvocationId for the activity recipe).
	InvocationID string
	// RequestDigest is the request's semantic digest (e.g. semantic request
	// digest v2) and SemanticRecipe its recipe stamp. Both are recorded; a
	// later Do under the same identity with a different digest or recipe gets
	// *MismatchError, never the recorded outcome. Both empty: no digest.
	// RequestDigest: at most 128 characters of [A-Za-z0-9._~:+/=-];
	// SemanticRecipe: at most 64 of [A-Za-z0-9._~:-].
	RequestDigest  string
	SemanticRecipe string
	// Streamed marks an effect whose response body is streamed: the body is
	// never cached; only the request digest, the final outcome (success or
	// failure) and the body's SHA-256 and length are recorded, and a
	// duplicate gets Result.Streamed with no Value. With Do, the value fn
	// returns is the body (returned to this caller, not recorded); DoStream
	// streams it to a writer instead and sets Streamed itself.
	Streamed bool
	// Retry, if set, is the effect's retry schedule: attempt cap, time
	// budget and backoff (see Retry). The cap and budget are recorded when
	// the record is created. Default nil: an attempt that ends without an
	// outcome may be retried at once (or at the time the provider asked for
	// with RetryAt), up to Config.MaxAttempts attempts. A Retry with a
	// negative field is refused before anything fires, with an error
	// matching ErrConfig.
	Retry *Retry
}

func (e *Effect) validate() error {
	if err := e.Identity.Validate(); err != nil {
		return err
	}
	if e.RunID != "" {
		if !ids.ValidRunID(e.RunID) {
			return fmt.Errorf("%w: runId does not match <tenant>/<opaque> (an opaque part of 16..128 characters of A-Z a-z 0-9 . _ ~ -)", ErrInvalidIdentity)
		}
		if !strings.HasPrefix(e.RunID, e.Identity.Tenant+"/") {
			return fmt.Errorf("%w: runId belongs to another tenant than the effect", ErrInvalidIdentity)
		}
		if e.NodeID == "" {
			return fmt.Errorf("%w: nodeId is required with a runId", ErrInvalidIdentity)
		}
	}
	if e.NodeID != "" && !ids.ValidNodeID(e.NodeID) {
		return fmt.Errorf("%w: nodeId does not match the nodeId grammar", ErrInvalidIdentity)
	}
	if e.InvocationID != "" && !validInvocation(e.InvocationID) {
		return fmt.Errorf("%w: invocationId outside ^[A-Za-z0-9._~:/-]{1,128}$", ErrInvalidIdentity)
	}
	if (e.RequestDigest == "") != (e.SemanticRecipe == "") {
		return fmt.Errorf("%w: RequestDigest and SemanticRecipe go together", ErrInvalidIdentity)
	}
	if e.RequestDigest != "" && (!validDigest(e.RequestDigest) || !validRecipe(e.SemanticRecipe)) {
		return fmt.Errorf("%w: RequestDigest or SemanticRecipe outside its grammar", ErrInvalidIdentity)
	}
	return nil
}

// Call is what the effect function receives.
type Call struct {
	// EffectID is the effect's identity.
	EffectID string
	// ProviderKey is the idempotency key to send to the provider (e.g. as
	// the Idempotency-Key header). The same on every attempt.
	ProviderKey string
	// Attempt is this attempt's number, from 1 (telemetry only: it never
	// takes part in an identity or key).
	Attempt int
	// Fence is the fencing token the fire mark was written with (0 when no
	// Fencer is configured); pass it to a provider that checks fences.
	Fence uint64
}

// Func performs the effect. Its context is cancelled with cause ErrLeaseLost
// (context.Cause) when a heartbeat finds the claim reclaimed by another
// executor, or when renewals kept failing until the lease last written
// would end before the next one (see Config.Heartbeat): the function
// should then stop, as its outcome will not be recorded. It returns the value to record (a small result
// such as the provider's object id; for a streamed effect it is returned to
// this caller but not recorded), or an error:
//
//   - an error wrapping ErrNotSent (NotSent): the request did not reach the
//     provider; the attempt is released and nothing is recorded;
//   - an error wrapping ErrUncertain (Uncertain): the request may have
//     reached the provider; the attempt becomes escaped, nothing is recorded,
//     and the next attempt reuses the provider key;
//   - any other error: a failure outcome, recorded and returned (as
//     *FailedError) to this caller and every duplicate; except an error
//     returned after Do's own ctx ended (the caller's cancellation or
//     deadline), which may be that end cutting the request: the attempt
//     ends as for ErrUncertain, and Do returns an error matching
//     ErrUncertain, ctx's error and the function's.
//
// A panic (or a crash) leaves the attempt firing; once its lease expires the
// next executor reclaims it and marks it escaped.
type Func func(ctx context.Context, call Call) ([]byte, error)

// Result is what Do returns.
type Result struct {
	// EffectID and ProviderKey identify the effect.
	EffectID, ProviderKey string
	// Value is the effect's result (recorded, or returned by this call's
	// effect function).
	Value []byte
	// Streamed says the body was streamed and is not recorded.
	Streamed bool
	// Replayed is true when the outcome came from the record and nothing
	// fired in this call (a suppressed duplicate).
	Replayed bool
	// Attempt is the attempt that produced the outcome.
	Attempt int
	// ValueDropped is true on a replay whose recorded success carries no
	// value because it exceeded Config.MaxValueBytes (Value is nil).
	ValueDropped bool
	// Resolved is true on a replay of a success an operator recorded
	// (Ledger.Resolve as Delivered): the provider had the effect, but no
	// value was ever recorded (Value is nil), so a caller that needs the
	// provider's answer looks it up there.
	Resolved bool
	// BodyDigest and BodySize describe a streamed body (Streamed): the
	// SHA-256 (hex) and length of what the effect streamed, as recorded.
	// A replay carries them, never the body.
	BodyDigest string
	BodySize   int64
}

func effectKey(effectID string) string { return "effect#" + effectID }

// Do runs fn at most once per effect identity across every process and
// entry point, as a durable singleflight:
//
//   - the first executor claims the identity with an insert-if-absent, calls
//     fn with the provider key and records the outcome. Without a Fencer the
//     claim is itself the fire mark, the point of no return: it is written
//     in state firing with the attempt fired (2 store round trips: claim,
//     outcome). With Config.Fencer a fire mark carrying the fencing token
//     is written between the claim and the call (3 round trips: claim, fire
//     mark, outcome);
//   - a duplicate (concurrent or later) fires nothing and gets the recorded
//     outcome (1 round trip when the store returns the existing record with
//     the failed claim), counted as MetricSuppressions; a recorded failure
//     comes back as *FailedError;
//   - a live claim held elsewhere is waited for (bounded by Config.Wait),
//     then *InFlightError;
//   - an expired claim is reclaimed atomically: the stalled attempt becomes
//     escaped if it had passed the point of no return, else released, and
//     the new attempt calls fn with the same provider key. Without a Fencer
//     the claim is the point of no return, so an executor that died after
//     its claim and before calling the provider is shown escaped (it may
//     have fired), not released; the next attempt reuses the provider key,
//     so a provider that honours it performs the effect once. With a Fencer
//     such an attempt (claimed, no fire mark) is released;
//   - an executor whose ctx is done right after its claim (or, with a
//     Fencer, its fire mark) knows it did not call fn: it gives the claim
//     back (the attempt is released, unfired) and returns ctx's error. The
//     claim's (or reclaim's) store call is not cut by ctx's cancellation
//     nor its deadline: it waits for its answer, at most
//     Config.OutcomeTimeout once ctx ended, so that the claim is given
//     back after it landed, never before;
//   - the outcome of fn is recorded even when ctx ended while fn ran (the
//     effect ran): that write, and the release of a claim whose fn was not
//     called, are detached from ctx and bounded by Config.OutcomeTimeout,
//     so a store that hangs never holds Do past it (an outcome not written
//     leaves the attempt firing, reclaimed as escaped after its lease, and
//     Do's error matches ErrOutcomeNotRecorded);
//   - every write after the claim is conditional on the owner token, attempt
//     and state: an executor whose claim was reclaimed gets ErrLeaseLost and
//     never overwrites the new owner's record;
//   - while fn runs, a heartbeat renews the lease (Config.Heartbeat), so a
//     long effect is not reclaimed while its executor is alive; a renewal
//     refused because the claim was reclaimed cancels fn's context with
//     cause ErrLeaseLost, and so do renewals failing with errors until the
//     lease last written would end before the next tick (fn's context
//     ends before that lease does; an error fn then returns is not
//     recorded, Do returns ErrLeaseLost and the attempt is reclaimed as
//     escaped after its lease, except NotSent, recorded as ever: the
//     attempt released; a success fn still returns is recorded under
//     the same fence as every outcome, and Do returns it unless that write
//     is refused or fails; refused because the attempt was reclaimed, a
//     success is still recorded when the fence proves that no other
//     attempt passed since, see strandedOutcome);
//   - every write after the claim also extends the record's retention to
//     now+Retention, so a record can never pass its retention between the
//     point of no return and the outcome (which would let a later claim
//     re-fire); under a RetainingFencer never past what the fence keeps of
//     the attempt's token (see RetainingFencer);
//   - an effect with Config.MaxAttempts attempts and no outcome fires no
//     more: *AttemptsExhaustedError;
//   - a different RequestDigest (or recipe) under the same identity is
//     *MismatchError.
//
// A reclaim costs a failed claim, the conditional takeover and the outcome
// (3 round trips; 4 with a Fencer, for the fire mark).
//
// Witness: a run that makes an attempt at a record another run created first
// writes a run reference (one extra round trip on that reclaim, before the
// claim changes hands), so its witness lists the effect; a suppressed
// duplicate does so only with Config.WitnessDuplicates.
func (l *Ledger) Do(ctx context.Context, eff Effect, fn Func) (Result, error) {
	if fn == nil {
		return Result{}, errors.New("ledger: nil effect function")
	}
	caller := ctx
	return l.do(ctx, eff, func(ctx context.Context, c Call) (produced, error) {
		v, err := fn(ctx, c)
		if err != nil && caller.Err() != nil {
			// The caller's context ended while fn ran: an error fn then
			// returns may be that end cutting its request (an HTTP
			// client's "context canceled"), not the provider's answer.
			err = cutByCaller(caller, err, "the effect function failed after its caller's context ended (%w), so its request may have reached the provider")
		}
		p := produced{value: v}
		if eff.Streamed {
			sum := sha256.Sum256(v)
			p.bodyDigest, p.bodySize = hex.EncodeToString(sum[:]), int64(len(v))
		}
		return p, err
	})
}

// cutByCaller is the error of an effect function that returned err (nil
// for a stream function that said nothing) after its caller's context
// ended: err itself when the function classified it (NotSent, Uncertain),
// else an ErrUncertain error matching the context's error, its cause and
// err, so that the attempt ends escaped and the next one fires again under
// the same provider key, instead of recording a success or a failure the
// context's end may have made. msg has one %w, for the context's end.
//
// It is asked of the caller's context, not the function's: this attempt's
// lease cancels only the function's (decided in fire), while the caller's
// may end with any cause, ErrLeaseLost included (the context of an outer
// effect function).
func cutByCaller(caller context.Context, err error, msg string) error {
	if errors.Is(err, ErrNotSent) || errors.Is(err, ErrUncertain) {
		return err
	}
	cerr := caller.Err()
	if cause := context.Cause(caller); cause != cerr {
		cerr = fmt.Errorf("%w: %w", cerr, cause)
	}
	if err != nil {
		cerr = errors.Join(cerr, err)
	}
	return fmt.Errorf("%w: "+msg, ErrUncertain, cerr)
}

// produced is what an attempt's effect function produced: the value returned
// to the caller (recorded unless streamed) and, for a streamed body, its
// digest and size.
type produced struct {
	value      []byte
	bodyDigest string
	bodySize   int64
	// relayed says the body was copied to a writer as it came (DoStream),
	// so a cancellation may have cut it.
	relayed bool
}

// effectFunc is the internal form of Func and StreamFunc.
type effectFunc func(ctx context.Context, call Call) (produced, error)

func (l *Ledger) do(ctx context.Context, eff Effect, fn effectFunc) (Result, error) {
	r, err := l.attempt(ctx, eff, fn)
	return r, l.storeChecked(ctx, err)
}

func (l *Ledger) attempt(ctx context.Context, eff Effect, fn effectFunc) (res Result, err error) {
	if err := eff.validate(); err != nil {
		return Result{}, err
	}
	if err := eff.Retry.validate(l.cfg.MaxAttempts); err != nil {
		return Result{}, err
	}
	// The claim's span covers the decision; the provider call and the
	// record have their own, under the caller's span (parent).
	parent := ctx
	ctx, claim := l.span(ctx, spanClaim, eff)
	defer func() {
		if claim.recording() {
			claim.end(res.Attempt, answerOutcome(res, err), err)
		}
	}()
	st := l.cfg.Store
	key := effectKey(eff.Identity.EffectID)
	token := newToken()
	maxPolls := 0
	if l.cfg.Wait > 0 {
		maxPolls = max(1, int(l.cfg.Wait/l.cfg.PollInterval))
	}
	polls := 0
	refWritten := false
	var cur *Record
	// reread replaces cur with the stored record (nil when absent).
	reread := func() error {
		c, err := st.Get(ctx, key)
		if err == nil {
			cur = c
		}
		return err
	}
	for round := 0; round < maxRounds+maxPolls; round++ {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		now := l.now()
		if cur == nil || !cur.Live(now) {
			rec := l.newEffectRecord(eff, key, token, now)
			cctx, ended := l.claimCall(ctx)
			won, c, err := st.Create(cctx, rec, now)
			ended()
			if err != nil {
				// The claim may have landed with its answer lost: give
				// it back unfired (a no-op when it did not land).
				l.release(ctx, rec)
				return Result{}, err
			}
			if won {
				claim.end(rec.Attempt, outcomeClaimedSpan, nil)
				return l.fire(parent, eff, rec, fn)
			}
			if c == nil {
				if c, err = st.Get(ctx, key); err != nil {
					return Result{}, err
				}
			}
			if cur = c; cur == nil || !cur.Live(now) {
				continue
			}
		}
		if err := checkMatch(cur, eff); err != nil {
			return Result{}, err
		}
		switch cur.State {
		case StateCompleted:
			l.count(MetricSuppressions, identity.KindEffect, cur.Keying)
			if l.cfg.WitnessDuplicates && needsRunRef(cur, eff.RunID) {
				if err := st.AddRunRef(ctx, key, eff.RunID, now.Add(l.cfg.Retention)); err != nil {
					return Result{}, fmt.Errorf("ledger: run reference of %s: %w", cur.EffectID, err)
				}
			}
			return replay(cur)
		case StateReleased:
			if now.Before(cur.NotBefore) && cur.Attempt < l.attemptCap(cur) && !pastBudget(cur, now) {
				// The next attempt is scheduled later: fire nothing.
				return Result{}, &RetryLaterError{EffectID: cur.EffectID, At: cur.NotBefore, Attempt: cur.Attempt,
					MaxAttempts: l.attemptCap(cur), Deadline: cur.Deadline}
			}
		case StateClaimed, StateFiring:
			if now.Before(cur.LeaseUntil) {
				if polls >= maxPolls {
					return Result{}, &InFlightError{EffectID: cur.EffectID, RetryAfter: max(time.Second, cur.LeaseUntil.Sub(now).Round(time.Second))}
				}
				polls++
				if err := l.cfg.Test.Clock.Sleep(ctx, l.cfg.PollInterval); err != nil {
					return Result{}, err
				}
				if err := reread(); err != nil {
					return Result{}, err
				}
				continue
			}
		}
		// Released, or a stalled owner whose lease expired: reclaim atomically.
		if cur.Attempt >= l.attemptCap(cur) || pastBudget(cur, now) {
			if done, err := l.exhausted(ctx, cur, now); done {
				return Result{}, err
			}
			// The close-out lost a race: re-read and decide again.
			if err := reread(); err != nil {
				return Result{}, err
			}
			continue
		}
		if !refWritten && needsRunRef(cur, eff.RunID) {
			// Before the claim changes hands: an attempt by this run is never
			// missing from its witness.
			if err := st.AddRunRef(ctx, key, eff.RunID, now.Add(l.cfg.Retention)); err != nil {
				return Result{}, fmt.Errorf("ledger: run reference of %s: %w", cur.EffectID, err)
			}
			refWritten = true
		}
		next, escaped := l.reclaimRecord(cur, eff, token, now)
		want := Expect{Owner: cur.Owner, Attempt: cur.Attempt, State: cur.State, LeaseExpired: cur.State != StateReleased}
		cctx, ended := l.claimCall(ctx)
		ok, c, err := st.Replace(cctx, next, want, now)
		ended()
		if err != nil {
			l.release(ctx, next) // as after a failed claim
			return Result{}, err
		}
		if ok {
			if cur.State != StateReleased {
				l.count(MetricReclaims, identity.KindEffect, cur.Keying)
			}
			if escaped {
				l.count(MetricEscaped, identity.KindEffect, cur.Keying)
			}
			claim.end(next.Attempt, outcomeReclaimedSpan, nil)
			return l.fire(parent, eff, next, fn)
		}
		cur = c
	}
	return Result{}, fmt.Errorf("ledger: effect %s: no decision after %d rounds", eff.Identity.EffectID, maxRounds)
}

func checkMatch(cur *Record, eff Effect) error {
	field := ""
	switch {
	case cur.Kind != identity.KindEffect:
		field = "kind"
	case cur.IdentityRecipe != eff.Identity.Recipe:
		field = "identityRecipe"
	case cur.SemanticRecipe != eff.SemanticRecipe:
		field = "semanticRecipe"
	case cur.RequestDigest != eff.RequestDigest:
		field = "requestDigest"
	default:
		return nil
	}
	return &MismatchError{EffectID: eff.Identity.EffectID, Field: field}
}

func replay(cur *Record) (Result, error) {
	r := Result{EffectID: cur.EffectID, ProviderKey: cur.ProviderKey, Replayed: true, Attempt: cur.Attempt}
	for i := len(cur.Attempts) - 1; i >= 0; i-- {
		// The attempt that produced the outcome: the last one, unless
		// attempts refused by its fence pass followed it (RED_TEAM 536).
		if cur.Attempts[i].State == AttemptCompleted {
			r.Attempt = cur.Attempts[i].N
			break
		}
	}
	o := cur.Outcome
	if o == nil {
		return r, fmt.Errorf("ledger: effect %s is completed without an outcome", cur.EffectID)
	}
	r.Streamed, r.ValueDropped = o.Streamed, o.Dropped
	r.BodyDigest, r.BodySize = o.BodyDigest, o.BodySize
	if o.OK {
		r.Value = slices.Clone(o.Value)
		if n := len(cur.Attempts); n > 0 && cur.Attempts[n-1].Operator != "" {
			r.Resolved = true
		}
		return r, nil
	}
	return r, &FailedError{EffectID: cur.EffectID, Message: o.Error, Replayed: true}
}

func (l *Ledger) newAttempt(n int, eff Effect, now time.Time) Attempt {
	inv := eff.InvocationID
	if inv == "" {
		inv = eff.Identity.InvocationID
	}
	return Attempt{N: n, State: AttemptClaimed, At: now, RunID: eff.RunID, NodeID: eff.NodeID, InvocationID: inv}
}

func (l *Ledger) newEffectRecord(eff Effect, key, token string, now time.Time) *Record {
	id := eff.Identity
	// The cap is recorded whether or not the effect has a Retry of its
	// own: an operator's ledger (`idemkit effects`, its Config the
	// defaults) reads the record, and must see the cap the executors stop
	// at, not its own (Resolve grants a pending effect an attempt only
	// once it is exhausted).
	capN := l.cfg.MaxAttempts
	var deadline time.Time
	if r := eff.Retry; r != nil {
		if r.MaxAttempts > 0 {
			capN = min(r.MaxAttempts, l.cfg.MaxAttempts)
		}
		if r.Budget > 0 {
			deadline = now.Add(r.Budget)
		}
	}
	rec := &Record{
		MaxAttempts: capN, Deadline: deadline,
		Key: key, Kind: identity.KindEffect, EffectID: id.EffectID, Tenant: id.Tenant,
		Keying: id.Keying, IdentityRecipe: id.Recipe,
		SemanticRecipe: eff.SemanticRecipe, RequestDigest: eff.RequestDigest,
		ProviderKey: id.ProviderKey, RunID: eff.RunID,
		State: StateClaimed, Owner: token, Attempt: 1, LeaseUntil: now.Add(l.cfg.Lease),
		Attempts:  []Attempt{l.newAttempt(1, eff, now)},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(l.cfg.Retention),
	}
	l.fuse(rec, now)
	return rec
}

// reopenUnsent reopens the fence for the token of rec's last fire-marked
// attempt when that attempt ended released, not sent (its function said
// the call never left, or the point-of-no-return write's answer was lost,
// so it was not called): its token may have passed the fence, which would
// refuse every later token although the provider was never reached. It
// reports whether the fence was reopened (a ReopeningFencer forgot that
// token's pass, or none had passed); another token's pass is kept.
func (l *Ledger) reopenUnsent(ctx context.Context, rec *Record) bool {
	rf, ok := l.cfg.Fencer.(ReopeningFencer)
	if !ok || rec.Fence == 0 {
		return false
	}
	for i := len(rec.Attempts) - 1; i >= 0; i-- {
		if a := rec.Attempts[i]; a.Fired {
			return a.State == AttemptReleased && rf.Reopen(ctx, rec.EffectID, rec.Fence) == nil
		}
	}
	return false
}

// heldPass is matched (errors.As) by a Fencer's refusal that names the
// pass it holds (fence.IssuedError): its token, and when it passed.
type heldPass interface {
	HeldPass() (token uint64, at time.Time)
}

// lapsedPass reports whether rec, a claim the fence refused because
// another token's pass is held (ErrPassHeld), is an escaped attempt's
// record that lapsed: no attempt of rec ever fired and the pass is at least
// Retention old (the fence keeps its item longer than the ledger keeps the
// record). It then puts that pass's token on rec, whose refused attempt is
// released as escaped, never fired (releaseAs): the effect is shown
// escaped, and a not-delivered resolution reopens the fence for exactly
// that token (Resolve). Without it every retry would be refused, and
// extend both, for good, with no resolution possible. A younger pass may
// be an attempt still in flight elsewhere (its record not yet replicated
// here): rec is then released as it was.
func (l *Ledger) lapsedPass(rec *Record, err error) bool {
	var h heldPass
	if !errors.As(err, &h) {
		return false
	}
	tok, at := h.HeldPass()
	if tok == 0 || at.IsZero() || l.now().Before(at.Add(l.cfg.Retention)) || tok < rec.Fence {
		return false
	}
	for _, a := range rec.Attempts {
		if a.Fired {
			return false
		}
	}
	rec.Fence = tok
	return true
}

// fused reports whether a claim is its own fire mark: without a Fencer
// nothing happens between the claim and the call but a context check, so
// the claim (or reclaim) is written in state firing with its attempt fired,
// and no separate fire-mark write is made. With a Fencer the token must be
// taken after the claim and checked by the fire-mark write, so the claim
// stays claimed.
func (l *Ledger) fused() bool { return l.cfg.Fencer == nil }

// fuse makes rec, a claim or reclaim written at now, its own fire mark when
// the claim is fused: state firing and the new attempt fired at now. Its
// lease (now+Lease) and retention (at least now+Retention) are already what
// the fire mark would set.
func (l *Ledger) fuse(rec *Record, now time.Time) {
	if !l.fused() {
		return
	}
	rec.State = StateFiring
	a := rec.last()
	a.Fired, a.FiredAt = true, now
}

// reclaimRecord builds the record that takes over cur for a new attempt
// (claimed, or firing when the claim is fused). The stalled attempt becomes
// escaped when it had passed the fire mark.
func (l *Ledger) reclaimRecord(cur *Record, eff Effect, token string, now time.Time) (*Record, bool) {
	next := cur.Clone()
	escaped := false
	if a := next.last(); a != nil && cur.State != StateReleased {
		a.At = now
		if cur.State == StateFiring {
			a.State, escaped = AttemptEscaped, true
		} else {
			a.State = AttemptReleased
		}
	}
	next.Attempt = cur.Attempt + 1
	next.NotBefore = time.Time{}
	next.Attempts = append(next.Attempts, l.newAttempt(next.Attempt, eff, now))
	next.Owner, next.State = token, StateClaimed
	next.LeaseUntil, next.UpdatedAt = now.Add(l.cfg.Lease), now
	next.ExpiresAt = l.claimExpiry(next.ExpiresAt, now)
	if next.LeaseUntil.After(next.ExpiresAt) {
		next.LeaseUntil = next.ExpiresAt
	}
	l.fuse(next, now)
	return next, escaped
}

// claimExpiry is the retention a reclaim writes over exp at now. A fused
// claim is its own fire mark: kept Retention from now (extend). Under a
// Fencer the record may hold an attempt whose token passed the point of no
// return, which only the fence keeps from firing again, and only as long
// as the fence keeps that pass (which, the record's every write made sure,
// is at least until exp): the reclaim asks the fence nothing, so it keeps
// the record no longer than it was (its lease ends by then at the latest);
// the fire mark after a token (whose Acquire kept the fence item Fence
// retention from then), or the release after a refusal the fence kept
// (ErrPassHeld), keeps it longer, as far as the fence does. A claim that
// never reaches the fence (its Token fails, or the executor stops) thus
// never keeps the record past the fence's item.
func (l *Ledger) claimExpiry(exp, now time.Time) time.Time {
	if l.fused() {
		return l.extend(exp, now)
	}
	return exp
}

// extend returns the later of exp and now+Retention: every write after the
// claim keeps the record inside its retention.
func (l *Ledger) extend(exp, now time.Time) time.Time {
	if e := now.Add(l.cfg.Retention); e.After(exp) {
		return e
	}
	return exp
}

// fenceFloor is the least time a Fencer keeps the item of a token asked
// for at asked: asked plus its FenceRetention (zero when the Fencer does
// not tell it). The fence's clock is taken to agree with the Ledger's.
func (l *Ledger) fenceFloor(asked time.Time) time.Time {
	if rf, ok := l.cfg.Fencer.(RetainingFencer); ok {
		return asked.Add(rf.FenceRetention())
	}
	return time.Time{}
}

// capAt returns exp, or until when exp is later and until is set: a
// fenced record's retention end, never past what the fence keeps.
func capAt(exp, until time.Time) time.Time {
	if !until.IsZero() && exp.After(until) {
		return until
	}
	return exp
}

// keepFence asks the Fencer to keep the item of rec's token at least until
// until (RetainingFencer.Keep; only asked when fenceFloor is set, so of a
// RetainingFencer).
func (l *Ledger) keepFence(ctx context.Context, rec *Record, until time.Time) error {
	return l.cfg.Fencer.(RetainingFencer).Keep(ctx, rec.EffectID, rec.Fence, until)
}

// needsRunRef reports whether runID must reference cur to see it in its
// witness: it neither created the record nor made an attempt at it.
func needsRunRef(cur *Record, runID string) bool {
	if runID == "" || cur.RunID == runID {
		return false
	}
	for _, a := range cur.Attempts {
		if a.RunID == runID {
			return false
		}
	}
	return true
}

// exhausted handles a claimable record that already has MaxAttempts
// attempts: a stalled last attempt (lease expired) is closed first, as
// escaped if it passed the fire mark, else released, with no new attempt.
// done is false when that close-out lost a race (re-read and decide again).
func (l *Ledger) exhausted(ctx context.Context, cur *Record, now time.Time) (done bool, err error) {
	if cur.State == StateClaimed || cur.State == StateFiring {
		next := cur.Clone()
		escaped := cur.State == StateFiring
		if a := next.last(); a != nil {
			a.At = now
			if escaped {
				a.State = AttemptEscaped
			} else {
				a.State = AttemptReleased
			}
		}
		next.State, next.UpdatedAt = StateReleased, now
		ok, _, err := l.cfg.Store.Replace(ctx, next, Expect{Owner: cur.Owner, Attempt: cur.Attempt, State: cur.State, LeaseExpired: true}, now)
		if err != nil {
			return true, err
		}
		if !ok {
			return false, nil
		}
		l.count(MetricReclaims, identity.KindEffect, cur.Keying)
		if escaped {
			l.count(MetricEscaped, identity.KindEffect, cur.Keying)
		}
		cur = next
	}
	e := &AttemptsExhaustedError{EffectID: cur.EffectID, Attempts: cur.Attempt, MaxAttempts: l.attemptCap(cur),
		Budget: cur.Attempt < l.attemptCap(cur) && pastBudget(cur, now), Deadline: cur.Deadline}
	for _, a := range cur.Attempts {
		if a.State == AttemptEscaped {
			e.Escaped = true
		}
	}
	return true, e
}

// fire runs an attempt this executor owns: fire mark (unless the claim rec
// was written firing, see fused), fn, outcome.
func (l *Ledger) fire(ctx context.Context, eff Effect, rec *Record, fn effectFunc) (Result, error) {
	st := l.cfg.Store
	own := Expect{Owner: rec.Owner, Attempt: rec.Attempt}
	res := Result{EffectID: rec.EffectID, ProviderKey: rec.ProviderKey, Attempt: rec.Attempt, Streamed: eff.Streamed}
	if err := ctx.Err(); err != nil {
		// fn was not called: give the claim back, fused or not.
		l.release(ctx, rec)
		return res, err
	}
	next := rec
	// fenceUntil is the least time the fence keeps the item of this
	// attempt's token (and so its pass): zero without a Fencer, or with
	// one that does not tell how long it keeps an item (RetainingFencer).
	var fenceUntil time.Time
	if rec.State == StateClaimed {
		next = rec.Clone()
		if l.cfg.Fencer != nil {
			fenceUntil = l.fenceFloor(l.now())
			f, err := l.cfg.Fencer.Token(ctx, rec.EffectID)
			if err != nil && l.reopenUnsent(ctx, rec) {
				f, err = l.cfg.Fencer.Token(ctx, rec.EffectID)
			}
			if err != nil {
				given := rec
				if errors.Is(err, ErrPassHeld) {
					// The fence kept the pass that refused this token
					// at least its retention from when it was asked:
					// so is the record, never longer.
					given = rec.Clone()
					given.ExpiresAt = capAt(l.extend(given.ExpiresAt, l.now()), fenceUntil)
					if l.lapsedPass(given, err) {
						l.releaseAs(ctx, given, AttemptEscaped)
						return res, fmt.Errorf("ledger: fencing token: %w", err)
					}
				}
				ferr := fmt.Errorf("ledger: fencing token: %w", err)
				if !errors.Is(err, ErrPassHeld) && !errors.Is(err, ErrStaleFence) && ctx.Err() == nil {
					// No token to be had (the fence out of reach): the
					// call did not leave, as for a NotSent call, so the
					// attempt is given back on the effect's retry
					// schedule (none without Retry: ferr unchanged).
					// Else each Do would spend another attempt at once.
					given = rec.Clone()
					ferr = l.schedule(eff, given, l.now(), ferr)
				}
				l.release(ctx, given)
				return res, ferr
			}
			next.Fence = f
		}
		// The fire mark: the point of no return.
		now := l.now()
		next.State, next.LeaseUntil, next.UpdatedAt = StateFiring, now.Add(l.cfg.Lease), now
		next.ExpiresAt = capAt(l.extend(next.ExpiresAt, now), fenceUntil)
		a := next.last()
		a.Fired, a.At, a.FiredAt = true, now, now
		own.State = StateClaimed
		ok, cur, err := st.Replace(ctx, next, own, now)
		if err != nil {
			// fn was not called, but the mark may have landed with its
			// answer lost. Left firing, the attempt would be reported
			// escaped once its lease ended; give it back unfired from
			// either state instead (each write is conditional on one of
			// them, so at most one applies).
			l.release(ctx, rec)
			l.release(ctx, next)
			return res, fmt.Errorf("ledger: fire mark of %s: %w", rec.EffectID, err)
		}
		if !ok {
			if next.Fence > 0 && cur != nil && cur.Fence > next.Fence {
				// Still the owner, but fenced out: give the claim back unfired.
				l.count(MetricStaleFence, identity.KindEffect, rec.Keying)
				l.release(ctx, rec)
				return res, ErrStaleFence
			}
			return res, ErrLeaseLost
		}
		if err := ctx.Err(); err != nil {
			// The context ended as the fire mark landed: fn is not
			// called (called, it could only fail on the ended context,
			// which would read as a request that context cut, escaped).
			// Give the attempt back unfired from the state the mark
			// wrote; the token never passed the fence (a guarded
			// function passes it first), so the next token is good.
			l.release(ctx, next)
			return res, err
		}
	}

	_, call := l.span(ctx, spanProvider, eff)
	out, gaveUp, fenceUntil, leaseEnd, ferr := l.run(ctx, next, fenceUntil, fn)
	if call.recording() {
		call.end(next.Attempt, answerOutcome(Result{}, providerOutcome(ferr)), ferr)
	}
	if gaveUp && (ferr != nil || out.relayed) && !errors.Is(ferr, ErrNotSent) {
		// The heartbeat's renewals failed until the lease could end: fn's
		// context was cancelled with ErrLeaseLost, and an error it then
		// returns is not recorded (an error caused by that cancellation
		// must not become a recorded failure). Except NotSent: fn says
		// the request never left (e.g. it was still waiting to send, or
		// its fence pass was refused), so the attempt is released below,
		// fenced as every outcome, and the next attempt fires at once
		// (under a fence, reopening the pass its token may hold); left
		// firing, it would be reclaimed as escaped, and under a fence
		// every later attempt refused by that pass (RED_TEAM 535). The
		// attempt stays firing,
		// as after a refused renewal; once its lease ends the next
		// executor reclaims it as escaped and reuses the provider key.
		// A success is recorded below, under the same fence as every
		// outcome: the effect fired, and the record keeps any other
		// executor from firing it again unless one reclaimed it first.
		// A relayed stream's success is not (DoStream): the cancellation
		// also cut its body, so a stream function that returns nil then
		// may have relayed only part of it, and the body's digest and
		// size would record a truncated stream as the effect's answer. (A
		// streamed effect's body that Do's function returned is whole.)
		return res, notRecorded(rec.EffectID, ferr)
	}
	val := out.value
	if eff.Streamed {
		res.BodyDigest, res.BodySize = out.bodyDigest, out.bodySize
	}

	now := l.now()
	done := next.Clone()
	done.UpdatedAt = now
	a := done.last()
	a.At = now
	var retErr error
	switch {
	case ferr == nil:
		res.Value = val
		done.State, a.State = StateCompleted, AttemptCompleted
		o := &Outcome{OK: true, Streamed: eff.Streamed}
		switch {
		case eff.Streamed:
			o.BodyDigest, o.BodySize = out.bodyDigest, out.bodySize
		case len(val) > l.cfg.MaxValueBytes:
			o.Dropped = true
		default:
			o.Value = slices.Clone(val)
		}
		done.Outcome = o
	case errors.Is(ferr, ErrNotSent):
		done.State, a.State = StateReleased, AttemptReleased
		retErr = l.schedule(eff, done, now, ferr)
	case errors.Is(ferr, ErrUncertain):
		done.State, a.State = StateReleased, AttemptEscaped
		retErr = l.schedule(eff, done, now, ferr)
	default:
		msg := cutMessage(ferr.Error())
		done.State, a.State = StateCompleted, AttemptCompleted
		done.Outcome = &Outcome{OK: false, Streamed: eff.Streamed, Error: msg}
		if eff.Streamed {
			done.Outcome.BodyDigest, done.Outcome.BodySize = out.bodyDigest, out.bodySize
		}
		retErr = &FailedError{EffectID: rec.EffectID, Message: msg, Cause: ferr}
	}
	done.ExpiresAt = l.extend(done.ExpiresAt, now)
	if a.State == AttemptEscaped && !fenceUntil.IsZero() && done.ExpiresAt.After(fenceUntil) {
		// An escaped attempt's record is what keeps the effect from
		// firing again with the fence's pass, and must not be kept
		// longer than the fence keeps it: the fence is asked to keep
		// the item as long as the record first (one write, on this path
		// only when the call outlived the margin between the two
		// retentions). If it cannot, the record is kept only as long
		// as the fence is known to keep the pass (fail closed: an
		// effect whose record ended is a new one).
		kctx := l.detached(ctx)
		if l.keepFence(kctx, done, done.ExpiresAt) != nil {
			done.ExpiresAt = fenceUntil
		}
		kctx.release()
	}
	// The outcome is recorded even if ctx was cancelled while fn ran, under
	// a deadline of its own (Config.OutcomeTimeout). While the lease last
	// written holds, that deadline is also the renewal margin before its
	// end: another executor may reclaim the attempt once it ends and fire
	// again, so a write that would still be in flight then is given up
	// first, and the attempt is left firing as for any unwritten outcome.
	// A write made once that lease ended (the clock moved past it while fn
	// ran) is left to the store's condition, which refuses it if the
	// attempt was reclaimed (ErrLeaseLost).
	own.State = StateFiring
	_, record := l.span(ctx, spanRecord, eff)
	outcomeCtx := func() *detachedCtx {
		wctx := l.detached(ctx)
		if left := leaseEnd.Sub(l.now()); left > 0 {
			if end := clock.Wall().Add(max(left-clock.RenewMargin(max(l.cfg.Heartbeat, 0)), 0)); wctx.deadline.After(end) {
				wctx.deadline = end
			}
		}
		return wctx
	}
	wctx := outcomeCtx()
	ok, cur, err := st.Replace(wctx, done, own, now)
	wctx.release()
	if !ok && err == nil && cur == nil && done.Live(now) {
		// No item, within the record's retention: the ledger deletes no
		// record and TTL none within its retention in this replica, so
		// another region's deletion replicated here during the call (its
		// TTL deleting the old, expired record this one was created
		// anew over; reconciled-records). Left unrecorded, the auditor's
		// write-back restores the firing image and the effect's retry
		// reclaims it as escaped and calls the provider again (RED_TEAM
		// 549): the outcome is written where there is no item instead.
		ok, err = l.recreate(func() (context.Context, func()) { w := outcomeCtx(); return w, w.release }, done, own, now)
	}
	if !ok && err == nil && (ferr == nil && !out.relayed || errors.Is(ferr, ErrNotSent)) {
		if won := strandedOutcome(done, cur, now, l.extend); won != nil {
			// Reclaimed after this attempt passed the fence, and refused
			// by its pass: this success is the effect's outcome, or this
			// attempt's request never left (NotSent), so the next one may
			// reopen its pass.
			sctx := l.detached(ctx)
			ok, _, err = st.Replace(sctx, won, Expect{Owner: cur.Owner, Attempt: cur.Attempt, State: cur.State}, now)
			sctx.release()
			if err != nil || !ok {
				// Refused (the record moved on) or failed: as before,
				// not recorded by this attempt.
				ok, err = false, nil
			}
		}
	}
	switch {
	case err != nil && gaveUp:
		// An outcome after the heartbeat gave up (a success, or NotSent),
		// unrecorded: as when the heartbeat gives up, the attempt stays
		// firing for a reclaim.
		record.end(done.Attempt, "error", err)
		return res, errors.Join(ErrLeaseLost, &unrecordedError{effectID: rec.EffectID, err: err})
	case err != nil:
		// The verdict (retErr) was not recorded: the attempt stays firing
		// and a later Do reclaims it once its lease ends. The caller gets
		// the store's error (matching ErrOutcomeNotRecorded), never a
		// failure or a retry schedule the record does not hold.
		record.end(done.Attempt, "error", err)
		return res, &unrecordedError{effectID: rec.EffectID, verdict: verdict(ferr), err: err}
	case !ok:
		// Another executor reclaimed the attempt (and, for a success,
		// the fence does not prove it the effect's outcome, see
		// strandedOutcome): the record holds its outcome, not this
		// one's, which the caller must not act on.
		record.end(done.Attempt, "lease-lost", nil)
		return res, notRecorded(rec.EffectID, ferr)
	}
	record.end(done.Attempt, string(a.State), nil)
	if a.State == AttemptEscaped {
		// Counted once the record says so: an escaped outcome that was
		// not written leaves the attempt firing, and the reclaim after
		// its lease counts it (as a fenced one was counted by the
		// reclaim that fenced it). One whose every answer was lost may
		// have landed unseen, and is then not counted.
		l.count(MetricEscaped, identity.KindEffect, rec.Keying)
	}
	return res, retErr
}

// recreate writes done, the next state of the attempt own describes
// (its outcome, or a lease renewal), where its record is gone (RED_TEAM
// 549): a Create, which needs no item (or an expired one), and where the
// auditor's write-back of the deleted image landed first (the same owner,
// attempt and state as own), done's Replace over it. Anything else there
// (a claim made anew in the meantime) is not this attempt's to settle: ok
// false. Each write runs under a context from newCtx, released after it.
func (l *Ledger) recreate(newCtx func() (context.Context, func()), done *Record, own Expect, now time.Time) (bool, error) {
	st := l.cfg.Store
	cctx, release := newCtx()
	won, cur, err := st.Create(cctx, done, now)
	release()
	if err != nil || won {
		return won, err
	}
	if cur == nil {
		gctx, release := newCtx()
		cur, err = st.Get(gctx, done.Key)
		release()
		if err != nil {
			return false, err
		}
	}
	if cur == nil || !cur.Live(now) || cur.Owner != own.Owner || cur.Attempt != own.Attempt || cur.State != own.State {
		return false, nil
	}
	rctx, release := newCtx()
	ok, _, err := st.Replace(rctx, done, own, now)
	release()
	return ok, err
}

// strandedOutcome returns the record that writes done, a success (or a
// NotSent) whose own outcome write was refused, over cur, the record that
// refused it, when the fence proves that no other attempt passed since
// (RED_TEAM 536): cur is the same live record (created when done's was,
// to the millisecond a store keeps), released,
// still at done's fencing token (no later fire mark wrote another), done's
// attempt in it escaped (reclaimed after its lease ran out) and every
// attempt after it unfired and no operator's (each refused by the pass
// done's token holds, or given back before its point of no return). A
// success is then the effect's outcome: done's attempt is completed, the
// later ones stay released. A NotSent is recorded as done's attempt
// released, unsent, as its own write would have: the next attempt then
// reopens the pass of its token (reopenUnsent) instead of being refused
// by it. The owner token and attempt number are cur's (the write is
// conditional on them and on its state, as a reclaim is). Otherwise nil:
// without a fence, or once the fence let another attempt through (a
// resolution reopened it), the record is not this attempt's to settle.
func strandedOutcome(done, cur *Record, now time.Time, extend func(exp, now time.Time) time.Time) *Record {
	i := done.Attempt - 1
	if done.Fence == 0 || cur == nil || !cur.Live(now) || cur.State != StateReleased || cur.Fence != done.Fence ||
		cur.CreatedAt.UnixMilli() != done.CreatedAt.UnixMilli() || i < 0 || i >= len(cur.Attempts) {
		return nil
	}
	if a := cur.Attempts[i]; a.N != done.Attempt || a.State != AttemptEscaped || !a.Fired {
		return nil
	}
	for _, a := range cur.Attempts[i+1:] {
		if a.Fired || a.Operator != "" {
			return nil
		}
	}
	won := cur.Clone()
	won.UpdatedAt, won.ExpiresAt = now, extend(won.ExpiresAt, now)
	a := &won.Attempts[i]
	a.At = now
	switch {
	case done.State == StateCompleted && done.Outcome != nil && done.Outcome.OK:
		won.State, won.Outcome, won.NotBefore = StateCompleted, done.Outcome, time.Time{}
		a.State = AttemptCompleted
	case done.State == StateReleased && done.last().State == AttemptReleased:
		if done.NotBefore.After(won.NotBefore) {
			won.NotBefore = done.NotBefore
		}
		a.State = AttemptReleased
	default:
		return nil
	}
	return won
}

// maxMessage is the most bytes of a failure's message a record keeps.
const maxMessage = 1024

// cutMessage returns msg as valid UTF-8, each byte that is not part of a
// character replaced by U+FFFD (as encoding/json writes it, so the witness
// shows the text *FailedError carries), then its first maxMessage bytes,
// cut before a character that would not fit whole. Hand-written rather
// than strings.ToValidUTF8, which replaces a run of stray bytes with one
// U+FFFD where encoding/json writes one per byte.
func cutMessage(msg string) string {
	if !utf8.ValidString(msg) {
		var b strings.Builder
		b.Grow(len(msg) + 8)
		for i := 0; i < len(msg) && b.Len() <= maxMessage; {
			r, n := utf8.DecodeRuneInString(msg[i:])
			if r == utf8.RuneError && n == 1 {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteString(msg[i : i+n])
			}
			i += n
		}
		msg = b.String()
	}
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// notRecorded is Do's error when another executor reclaimed the attempt
// before this one's outcome was recorded: ErrLeaseLost, and what the
// effect function returned in the text only (verdict).
func notRecorded(effectID string, ferr error) error {
	return fmt.Errorf("%w: the outcome of %s (%s) was not recorded", ErrLeaseLost, effectID, verdict(ferr))
}

// verdict describes, for an error, what the effect function returned
// without wrapping it: a verdict that was not recorded must not be matched
// (errors.Is) as if it were.
func verdict(ferr error) string {
	if ferr == nil {
		return "it succeeded"
	}
	return "it returned: " + cutMessage(ferr.Error())
}

// schedule sets the next attempt of done, an attempt that ended without an
// outcome at now (see Retry), and returns the error Do returns for it:
// *RetryLaterError when a next attempt is allowed (Record.NotBefore set),
// *AttemptsExhaustedError when the attempt cap or the time budget leaves
// none, and ferr unchanged for an effect without Retry whose provider asked
// for no time (the caller decides, and may retry at once).
func (l *Ledger) schedule(eff Effect, done *Record, now time.Time, ferr error) error {
	asked, hasAsked := requestedAt(ferr)
	if eff.Retry == nil && !hasAsked {
		return ferr
	}
	var next time.Time
	if eff.Retry != nil {
		next = now.Add(eff.Retry.backoff(done.Attempt, l.cfg.Test.Jitter))
	}
	if hasAsked && asked.After(next) {
		next = asked
	}
	capN := l.attemptCap(done)
	if done.Attempt >= capN || (!done.Deadline.IsZero() && !next.Before(done.Deadline)) {
		e := &AttemptsExhaustedError{EffectID: done.EffectID, Attempts: done.Attempt, MaxAttempts: capN,
			Budget: done.Attempt < capN, Deadline: done.Deadline, Cause: ferr}
		for _, a := range done.Attempts {
			e.Escaped = e.Escaped || a.State == AttemptEscaped
		}
		if e.Budget {
			// Recorded, so that no later Do starts an attempt the budget
			// has no room for (see pastBudget).
			done.NotBefore = next
		}
		return e
	}
	done.NotBefore = next
	return &RetryLaterError{EffectID: done.EffectID, At: next, Attempt: done.Attempt, MaxAttempts: capN, Deadline: done.Deadline, Cause: ferr}
}

// release gives up rec, a claim this executor holds and whose effect
// function it has not called: claimed (before the fire mark) or firing (a
// fused claim), fenced on the owner token, attempt and that state. The
// attempt is released and loses its fire time, since it never fired. Best
// effort: if the write fails, the lease expires and the next executor
// reclaims it (released from claimed; escaped from firing, as it cannot know
// the function was never called). A claim or reclaim whose write's outcome
// is unknown is given back as it was written (a no-op when it did not
// land); a fire mark, from both the state it was written over and the one
// it wrote: each release is conditional on its state, so at most one
// applies. The write is detached from ctx, under its own deadline
// (Config.OutcomeTimeout): a claim is given back even when ctx ended, and a
// store that hangs does not hold the caller.
func (l *Ledger) release(ctx context.Context, rec *Record) {
	l.releaseAs(ctx, rec, AttemptReleased)
}

// releaseAs is release with the attempt ended in state as: released, or
// escaped for a claim refused by the pass of an escaped attempt whose
// record lapsed (lapsedPass).
func (l *Ledger) releaseAs(ctx context.Context, rec *Record, as AttemptState) {
	now := l.now()
	next := rec.Clone()
	next.State, next.UpdatedAt = StateReleased, now
	if a := next.last(); a != nil {
		a.State, a.At = as, now
		a.Fired, a.FiredAt = false, time.Time{}
	}
	wctx := l.detached(ctx)
	defer wctx.release()
	_, _, _ = l.cfg.Store.Replace(wctx, next, Expect{Owner: rec.Owner, Attempt: rec.Attempt, State: rec.State}, now)
}

// Lookup returns the record of effectID, or nil if there is none (or it is
// past its retention). It never recomputes an identity: effectID is used as
// recorded.
func (l *Ledger) Lookup(ctx context.Context, effectID string) (*Record, error) {
	r, err := l.cfg.Store.Get(ctx, effectKey(effectID))
	if err != nil || r == nil || !r.Live(l.now()) {
		return nil, err
	}
	return r, nil
}
