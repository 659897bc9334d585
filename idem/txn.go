package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/idem/internal/respsize"
	"github.com/idemkit/idemkit/idem/internal/scopeid"
	"github.com/idemkit/idemkit/idem/keyspace"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/header"
)

// txn is one keyed request going through the protocol.
type txn struct {
	g      *Guard
	in     *request
	key    string
	op     string
	id     string
	digest string
	owner  string
	// contract is the route's Contract (Route.Contract), which renders
	// the answers (render); nil when the route has none.
	contract *Contract
	// credential holds the values of the policy's credential parts
	// (Policy.Scope.Credential), by name; nil when it names none.
	credential map[string]string
	// decoded is the request Contract.Decode produced (routes with a
	// Contract), handed to the handler through its context.
	decoded any
	// failCode is the registry code of the last error the Guard answered
	// itself (fail), whatever body the policy rendered for it.
	failCode string
	// storeErr is the store's error when the claim failed (Once returns
	// it under ErrStoreUnavailable), or when the completion with
	// transactional writes was cancelled (Once wraps it in
	// ErrNotCommitted).
	storeErr error
	// x is the storage of what executing the handler takes (execute),
	// allocated once the request has its claim: a replay, a mismatch or
	// an in-flight answer does not carry it.
	x *execution
	// slot is the storage of the context of the request's first store
	// call made on its goroutine (the claim), taken by callSlot; later ones
	// are allocated, but for the completion's (execution.call). It lives
	// with the names (claimNames), never in the request: a store may read
	// a call's context after the call has ended (callCtx), and a replay's
	// request is reused (Guard.Do, requestPool), while the names' storage
	// never is.
	slot *callCtx
	// rawSum is the SHA-256 of the request body once rawKnown, and rawHex
	// its hex once made (RawBodySHA256).
	rawSum [32]byte
	rawHex string
	// names is the one buffer the digest, the record ID and the owner
	// token are views of (run), with room after them for rawHex: written
	// once each, never again once viewed.
	names []byte

	// The flags and the count of call slots used are kept together, after
	// every other field: the transaction is part of every request's one
	// allocation, which they keep in a smaller size class.

	// derived says the key came from Route.DeriveKey: the scope is the
	// derived keyspace and the key is never echoed.
	derived bool
	// async is the request's wait mode (Policy.InFlight.ModeHeader):
	// a duplicate of a pending request is answered at once.
	async bool
	// unrecorded is set when the handler's outcome (without transactional
	// writes) could not be written because the store was unavailable: the
	// answer is a 503, the outcome stands unrecorded.
	unrecorded bool
	// rawKnown says rawSum holds the request body's SHA-256.
	rawKnown bool
	// adapterLogs is set when the adapter running this unit of work logs
	// each failure itself, once (failurelog.Adapter): logFailure is silent.
	adapterLogs bool
	// outcome is the claim's outcome (OutcomeClaimed, …) once known, as
	// its index in claimOutcomes (0: not known yet): the "outcome" of a
	// log line that names none of its own.
	outcome uint8
}

// claimOutcomes are the claim outcomes a transaction keeps (txn.outcome),
// by index; index 0 is none yet.
var claimOutcomes = [...]string{
	outcomeClaimed:   OutcomeClaimed,
	outcomeReclaimed: OutcomeReclaimed,
	outcomeReplay:    OutcomeReplay,
	outcomeInFlight:  OutcomeInFlight,
	outcomeMismatch:  OutcomeMismatch,
}

// The indexes of the claim outcomes in claimOutcomes.
const (
	outcomeClaimed uint8 = iota + 1
	outcomeReclaimed
	outcomeReplay
	outcomeInFlight
	outcomeMismatch
)

// execution is the storage of a claimed request's execution (execute):
// one allocation for the handler's context, its claim state, the lease
// heartbeat, the completion's store call and the response it stores.
type execution struct {
	// leaseEnd is the wall-clock end of the claim's lease as last written
	// (claim or heartbeat renewal): the limit of the writes after the claim
	// (Guard.storeCtx).
	leaseEnd time.Time
	// cached is the storage of the response handed to Store.Complete:
	// the handler's, less what is not stored (cacheableInto).
	cached Response
	// cs is the storage of the claim state the handler's context
	// carries.
	cs claimState
	// values and lease are the storage of the handler's context: the
	// claim's values, and the lease's cancellation while a heartbeat runs.
	values claimValues
	lease  leaseCtx
	// hb is the storage of the lease heartbeat (outside a Lambda
	// invocation that ends before the lease).
	hb heartbeat
	// call is the storage of the context of the completion's store call.
	call callCtx
}

// attrs are a log line's attributes: every line of a keyed request carries
// the request id, the operation, the key's hash and an outcome (the line's
// own, or the claim's, or logOutcomeError before the claim).
func (t *txn) attrs(extra ...slog.Attr) []slog.Attr {
	out := append([]slog.Attr{
		slog.String("request_id", t.in.requestID),
		slog.String("operation", t.op),
		slog.String("key_hash", t.g.hash(t.key)),
	}, extra...)
	for _, a := range extra {
		if a.Key == "outcome" {
			return out
		}
	}
	o := claimOutcomes[t.outcome]
	if o == "" {
		o = logOutcomeError
	}
	return append(out, slog.String("outcome", o))
}

// claimOutcome counts the claim's outcome (MetricClaimOutcomes) and keeps
// it for the request's later log lines.
func (t *txn) claimOutcome(o uint8) {
	t.outcome = o
	t.g.count(MetricClaimOutcomes, claimOutcomes[o])
}

func (t *txn) logf(ctx context.Context, level slog.Level, msg string, extra ...slog.Attr) {
	if !t.g.log.Enabled(ctx, level) {
		return
	}
	t.g.log.LogAttrs(ctx, level, msg, t.attrs(extra...)...)
}

// logFailure logs a line about an outcome that fails the request (claim
// error, mismatch, in flight, handler error), unless an adapter that logs
// each failed record itself, once, runs this one (SQS: adapterLogs).
func (t *txn) logFailure(ctx context.Context, level slog.Level, msg string, extra ...slog.Attr) {
	if t.adapterLogs {
		return
	}
	t.logf(ctx, level, msg, extra...)
}

// render turns a handler's (or the stored) response into this request's
// answer: the policy's request-id member set to this request's id
// (Policy.RequestIDMember), then rendered per the request's Accept on a
// route whose Contract has Render. A Guard.Once value is not an HTTP
// answer: it is returned as Run returned it, replays included, never
// stamped or rendered.
func (t *txn) render(resp *Response) *Response {
	if t.in.method == methodEvent {
		return resp
	}
	return renderContract(t.contract, t.g.stampRequestID(resp, t.in.requestID), t.in.accept)
}

// decorate adds the policy's headers.
func (t *txn) decorate(resp *Response, replay bool, originalID string) *Response {
	key := t.key
	if t.derived {
		key = "" // the caller sent none; a derived key is never echoed
	}
	return t.g.decorate(resp, t.in, key, replay, originalID)
}

// errText is err's text with the raw key and the record ID replaced by
// their log hashes: a handler or store error may quote the request or name
// the record, the logs never carry either (the ID is an unkeyed hash of the
// tenant, operation and key: a guessed key could be checked against it).
func (t *txn) errText(err error) slog.Attr {
	return slog.String("error", t.redacted(err))
}

// redacted is err's text as errText logs it.
func (t *txn) redacted(err error) string {
	return t.g.redact(err.Error(), append([]string{t.key, t.id}, t.in.keyValues...))
}

// fail answers with the Guard's own error e, rendered by the policy.
func (t *txn) fail(e *apierr.Error) *Response {
	t.failCode = e.Code
	return t.decorate(t.g.errorResponse(e, t.in.requestID), false, "")
}

func internalError() *apierr.Error {
	return apierr.New(500, "internal_error", "The request could not be completed; retry it with the same Idempotency-Key.")
}

func (t *txn) run(ctx context.Context, route Route, run handlerFunc) *Response {
	g := t.g
	in := t.in
	// The tenant's scope is scopePrefix+scopeTenant (kept apart, so that
	// the usual case does not build the string).
	var scopePrefix, scopeTenant string
	switch {
	case in.tenant != "":
		scopePrefix, scopeTenant = "tenant:", in.tenant
	case g.cfg.Unauthenticated == AnonymousTenant:
		scopeTenant = AnonymousTenantID
	default:
		return t.fail(apierr.New(401, apierr.CodeUnauthenticated, "Authentication is required."))
	}
	if parts := g.cfg.Policy.Scope.Credential; len(parts) > 0 {
		// Without authentication (a single-tenant function, or an anonymous
		// request) an absent part is the anonymous, empty one.
		anonymous := in.tenant == "" || g.cfg.Tenant.Kind == tenantSingle
		values := make([]string, len(parts))
		t.credential = make(map[string]string, len(parts))
		for i, name := range parts {
			values[i] = in.credentialValue(name)
			if values[i] == "" && !anonymous {
				// The answer is the policy's bare 401; the operator learns
				// here which part the credential lacks.
				t.logf(ctx, slog.LevelWarn, "idempotency: refused 401: the request's credential lacks "+name+", a part the policy scopes keys by; "+
					"the credential must carry it where the tenant is read (the authorizer's context, a JWT claim, Config.HTTPCredential; "+
					"an idemkit API key: idemkit apikey create --attr "+name+"=VALUE)",
					slog.String("credential_part", name), slog.String("outcome", logOutcomeUnauthenticated))
				return t.fail(apierr.New(401, apierr.CodeUnauthenticated, "Authentication is required."))
			}
			t.credential[name] = values[i]
		}
		scopePrefix, scopeTenant = "", credentialScope(scopePrefix+scopeTenant, parts, values)
	}
	if t.derived {
		scopePrefix, scopeTenant = "", derivedScopePrefix+scopePrefix+scopeTenant
	}
	if t.op == "" {
		t.logf(ctx, slog.LevelError, "idempotency: no routed operation for request (register the handler on a ServeMux pattern, wrap the ServeMux, or set Config.HTTPOperation; "+
			"with chi, gorilla/mux, gin or echo use the middleware of idem/router/idemchi, idemmux, idemgin or idemecho: chi runs Use middlewares before routing, and none of them sets the request's pattern)",
			slog.String("outcome", logOutcomeMisconfigured))
		return t.fail(misconfigured("no routed operation for this request"))
	}
	if in.bodyErr != nil {
		return t.fail(apierr.New(400, apierr.CodeValidation, "The request body could not be decoded."))
	}
	// The body digest goes into the fingerprint from a stack buffer.
	var db [64 + 43]byte
	bodyDigest := db[:0]
	if route.Contract != nil || route.JSON || header.IsJSON(in.contentType) {
		// A body the Guard reads itself must be sent uncoded.
		if e := codedBody(in); e != nil {
			resp := t.fail(e)
			if resp.Headers == nil {
				resp.Headers = map[string][]string{}
			}
			resp.Headers["Accept-Encoding"] = []string{"identity"} // RFC 9110 §12.5.3
			return resp
		}
	}
	if c := route.Contract; c != nil {
		d, req, e := contractDigest(c, g.canonicalFunc(), in, canon.Scope{
			Tenant: in.tenant, Method: in.method, Operation: t.op, Credential: t.credential,
		})
		if e != nil {
			return t.fail(e)
		}
		bodyDigest, t.decoded = append(bodyDigest, d...), req
	} else if route.JSON || header.IsJSON(in.contentType) {
		if len(in.body) > 0 {
			n := route.Normalize
			if n == nil {
				n = g.cfg.Normalize
			}
			var err error
			if bodyDigest, t.rawKnown, err = appendDigestJSON(bodyDigest, in.body, n, &t.rawSum); err != nil {
				return t.fail(invalidJSON(in.body, err))
			}
			if g.bodyTenantDiffers(in) {
				return t.fail(errTenantMismatch())
			}
		} else {
			bodyDigest = t.appendDigestBytes(bodyDigest)
		}
	} else {
		bodyDigest = t.appendDigestBytes(bodyDigest)
	}
	// The body's media type where the handler reads the body by it
	// (bodyMediaType).
	media := route.Contract == nil && !route.JSON
	fp := fingerprintSum(in, t.op, bodyDigest, media, route.Headers)
	if e := t.readMode(); e != nil {
		return t.fail(e)
	}
	scopeOp, scopeMethod := "", ""
	if g.cfg.Policy.Scope.Operation {
		scopeOp = t.op
		if in.scopeMethod && in.method != "POST" {
			// A route that serves every method: the method is part of
			// the scope (the method and route). A POST's scope is the
			// route's alone, as before the method was added, so that
			// its records keep their IDs; no other method's equals it,
			// since each carries its method.
			scopeMethod = in.method
		}
	}
	// The fingerprint (fingerprint), the record ID, the claim's owner
	// token and, once an attempt runs under a policy that keeps it, the
	// raw body's hex hash (rawBodySHA256) are views of one buffer: one
	// allocation for the four. The raw body's hash is not taken here:
	// only the attempt that runs stores it, a replay never hashes the
	// body again; the buffer has room for it only when the policy keeps
	// it.
	// The claim's store call context is in the same allocation
	// (claimNames).
	var b [namesLen]byte
	m := appendStamp(b[:0], canon.RecipeRequest, fp)
	nd := len(m)
	m = scopeid.AppendMethod(m, scopePrefix, scopeTenant, scopeMethod, scopeOp, t.key) // keyspace.IDPrefixed
	ni := len(m)
	m = appendOwnerToken(m)
	if g.cfg.Policy.KeepRawBodyHash {
		c := new(claimNamesRaw)
		t.slot, t.names = &c.call, append(c.names[:0], m...)
	} else {
		c := new(claimNames)
		t.slot, t.names = &c.call, append(c.names[:0], m...)
	}
	t.digest, t.id, t.owner = bodyString(t.names[:nd]), bodyString(t.names[nd:ni]), bodyString(t.names[ni:])
	return t.claim(ctx, run)
}

// namesLen is the length of a keyed request's names: the fingerprint
// (its stamp), the record ID and the owner token (txn.run).
const namesLen = len(canon.RecipeRequest) + 1 + 43 + len(keyspace.CallerPrefix) + 43 + ownerTokenLen

// claimNames is the storage of a keyed request's names (txn.names) and of
// its claim's store call context (txn.slot): one allocation for both,
// which is never reused (the request may be: Guard.Do). claimNamesRaw has
// room after the names for the raw body's hex hash (rawBodySHA256), for a
// policy that keeps it.
type claimNames struct {
	call  callCtx
	names [namesLen]byte
}

type claimNamesRaw struct {
	call  callCtx
	names [namesLen + 2*sha256.Size]byte
}

// appendDigestBytes appends the canon.RecipeBytes digest of the request
// body to dst. Its hash is the raw body's (rawBodySHA256).
func (t *txn) appendDigestBytes(dst []byte) []byte {
	t.rawSum, t.rawKnown = sha256.Sum256(t.in.body), true
	return appendStamp(dst, canon.RecipeBytes, t.rawSum)
}

// rawBodySHA256 returns the hex SHA-256 of the request body for
// Record.RawBodySHA256, which the writes ending a claimed attempt store
// (Store.Complete, Store.Release), or "" when the policy keeps none
// (Policy.KeepRawBodyHash): the body digest's own hash when that was
// taken of the body's bytes as they are (a body that is not JSON, an
// empty one, a JSON body already in canonical form), else hashed now, on
// first use, after the claim (never on a replay).
func (t *txn) rawBodySHA256() string {
	if !t.g.cfg.Policy.KeepRawBodyHash {
		return ""
	}
	if t.rawHex == "" {
		if !t.rawKnown {
			t.rawSum, t.rawKnown = sha256.Sum256(t.in.body), true
		}
		if free := t.names[len(t.names):]; cap(free) >= 2*sha256.Size {
			// The room run left after the names: written once, here.
			t.rawHex = bodyString(hex.AppendEncode(free, t.rawSum[:]))
		} else {
			t.rawHex = rawBodySHA256(&t.rawSum)
		}
	}
	return t.rawHex
}

// bodyTenantDiffers reports whether the JSON body names, in
// Config.BodyTenantField, a tenant other than the credential's.
func (g *Guard) bodyTenantDiffers(in *request) bool {
	f := g.cfg.BodyTenantField
	if f == "" || len(in.body) == 0 {
		return false
	}
	bt, ok := bodyTenant(in.body, f)
	return ok && bt != in.tenant
}

// errTenantMismatch is the answer to a body naming another tenant.
func errTenantMismatch() *apierr.Error {
	return apierr.New(403, apierr.CodeForbidden,
		"The tenant in the request body is not the authenticated tenant.").
		WithDetails(map[string]any{"reason": "tenant_mismatch"})
}

// bodyTenant returns the top-level member field of a JSON object body.
func bodyTenant(body []byte, field string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return "", false
	}
	raw, ok := m[field]
	if !ok {
		return "", false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return "", false
	}
	if s := scalar(v); s != "" {
		return s, true
	}
	// An object or array is never a tenant id: mismatch. A number scalar
	// refuses (beyond what a double holds exactly) is compared as sent.
	return string(raw), true
}

func (t *txn) claim(ctx context.Context, run handlerFunc) *Response {
	g := t.g
	if cs, ok := ctx.Value(claimKey{}).(*claimState); ok && cs.info.ID == t.id && t.in.method != methodEvent {
		// The request already runs under a claim of this very scope: a
		// Guard is wired twice around the handler (around a mux and on
		// its route, an engine's and a group's middleware), this one or
		// another built from the same configuration (one on the
		// server, another on a group). Waiting on that claim would end
		// in 409 in flight, which the outer wiring would record as the
		// handler's answer; the handler runs under the outer claim
		// instead, which records its answer (in the outer Guard's
		// store: an inner Guard on a store of its own writes nothing).
		return g.plain(ctx, t.in, run)
	}
	store := g.cfg.Store
	lease, renew := g.leaseFor(ctx)
	if t.owner == "" {
		t.owner = newOwnerToken()
	}
	var budget time.Duration
	waiting := false
	if errors.Is(ctx.Err(), context.Canceled) {
		// Gone before its claim was sent: nothing to claim or give
		// back (the claim's call, detached from the cancellation, would
		// claim and release the key for no one).
		return t.clientClosed(ctx, "claim")
	}
	for {
		now := g.clock.Now()
		rec := Record{
			ID:           t.id,
			Digest:       t.digest,
			State:        StatePending,
			Owner:        t.owner,
			LeaseExpires: now.Add(lease),
			RequestID:    t.in.requestID,
			Expires:      g.expires(now),
		}
		sctx, span := t.span(ctx, spanClaim)
		// started is when the claim was sent (wall time): the lease is
		// counted from it.
		started := g.wallAt(now)
		// The claim's call waits for its own answer, its caller's
		// cancellation detached (its deadline kept): a claim whose
		// caller went away while it was on the way is then given back
		// after it landed, never before it, where the give-back would
		// write nothing and the claim, landing, would hold the key in
		// flight for its whole lease (RED_TEAM 451).
		cctx := g.storeCtxAt(t.callSlot(), sctx, true, time.Time{}, started)
		res, err := store.Claim(cctx, rec, now)
		cctx.release()
		t.endSpan(span, claimSpanOutcome(res, err), err)
		if err == nil && (res.Decision == Claimed || res.Decision == Reclaimed) && errors.Is(ctx.Err(), context.Canceled) {
			// The caller went away while its claim was on the way:
			// given back, so that its retry runs at once.
			t.giveBack(ctx, time.Time{})
			return t.clientClosed(ctx, "claim")
		}
		if err != nil {
			t.storeErr = err
			if errors.Is(err, ErrStoreMisconfigured) {
				return t.storeMisconfigured(ctx, err)
			}
			if clientGone(ctx, err) {
				// The claim may have landed: give it back, so that the
				// client's retry runs at once.
				t.giveBack(ctx, time.Time{})
				return t.clientClosed(ctx, "claim")
			}
			if errors.Is(err, ErrNotKept) {
				first := ""
				if res.Decision == Exists {
					first = res.Record.RequestID
				}
				return t.responseLost(ctx, err, first)
			}
			t.logFailure(ctx, slog.LevelError, "idempotency: claim failed", t.errText(err), storeOutcome(err))
			if storeUnavailable(err) {
				// The claim may have landed with every answer lost (or
				// land late, a call that timed out): give it back, so
				// that the caller's retry runs rather than meets its own
				// claim in flight until the lease ends. Bounded briefly:
				// the store is failing, and the 503 waits for it.
				t.giveBack(ctx, clock.Wall().Add(lostClaimRelease))
				return t.unavailable()
			}
			return t.fail(internalError())
		}
		if res.Decision == Claimed || res.Decision == Reclaimed {
			return t.execute(ctx, res, renew, rec.LeaseExpires, started.Add(lease), run)
		}
		cur := res.Record
		// straight: the claim's own answer is the final record of this
		// digest, which inspect replays at once (no wait, no read).
		straight := !waiting && cur.Digest == t.digest && cur.State.Final()
		if !waiting {
			if !t.async {
				budget = g.waitBudget(ctx)
			}
			waiting = true
		}
		act, cur := t.inspect(ctx, cur, &budget)
		switch act {
		case actReplay:
			if cur.Response != nil && cur.Response.NotKept > 0 {
				// Final, under every policy and whatever the route
				// renders: the handler never runs again for the key.
				return t.notKept(ctx, &cur)
			}
			if resp, ok := t.replayObject(ctx, &cur, cur.Response, budget); ok {
				_, span := t.span(ctx, spanReplay)
				t.endSpan(span, OutcomeReplay, nil)
				t.claimOutcome(outcomeReplay)
				t.logf(ctx, slog.LevelDebug, "idempotency: replay (object)", slog.String("outcome", OutcomeReplay), slog.Int("attempt", cur.Attempt))
				return resp
			}
			// A straight replay hands nothing of the request to code
			// that may keep it (no handler, no object loader, no wait):
			// Do may reuse the request once the answer is built.
			t.in.reusable = straight && t.in.object == nil
			return t.replay(ctx, &cur)
		case actLost:
			return t.responseLost(ctx, t.storeErr, cur.RequestID)
		case actMismatch:
			t.claimOutcome(outcomeMismatch)
			t.logFailure(ctx, slog.LevelInfo, "idempotency: digest mismatch", slog.String("outcome", OutcomeMismatch))
			return t.fail(apierr.New(409, apierr.CodeIdempotencyKeyMismatch,
				"The Idempotency-Key has already been used with a different request payload."))
		case actInFlight:
			if t.async || t.pendingAfterBudget() {
				return t.pending(ctx, &cur)
			}
			if errors.Is(ctx.Err(), context.Canceled) {
				// The duplicate's client hung up while it waited.
				return t.clientClosed(ctx, "wait")
			}
			t.claimOutcome(outcomeInFlight)
			t.logFailure(ctx, slog.LevelInfo, "idempotency: in flight", slog.String("outcome", OutcomeInFlight))
			resp := t.fail(apierr.New(409, apierr.CodeIdempotencyInFlight,
				"A request with this Idempotency-Key is still being processed."))
			resp.Headers[HeaderRetryAfter] = []string{strconv.Itoa(g.retryAfter(&cur, g.clock.Now()))}
			return resp
		}
		// actClaim: the record went away or became reclaimable; claim again.
	}
}

// lostClaimRelease bounds the release of a claim whose Claim call failed
// as the store being unavailable (giveBack): best effort, on a store that
// is failing, before the 503 is answered.
const lostClaimRelease = time.Second

// giveBack releases this request's claim after a Claim call that failed
// and may have landed (applied with every answer lost, or applied after
// the call gave up), so that a same-key retry reclaims it at once instead
// of meeting 409 idempotency_in_flight until the lease ends. The handler
// has not run. The release is fenced by the owner token, which only this
// request holds: a claim that never landed, or one already taken over
// after its lease, is left as it is (the release writes nothing). It is
// detached from the client's cancellation and bounded by limit (zero: the
// store call's own bounds); an error is only logged. It carries this
// request's raw body hash, as every write ending an attempt does (a rare
// path: the hash is taken here).
func (t *txn) giveBack(ctx context.Context, limit time.Time) {
	g := t.g
	rctx := g.storeCtx(t.callSlot(), ctx, true, limit)
	err := g.cfg.Store.Release(rctx, Record{ID: t.id, Owner: t.owner, RawBodySHA256: t.rawBodySHA256()}, g.clock.Now())
	rctx.release()
	if err != nil {
		t.logf(ctx, slog.LevelDebug, "idempotency: no claim given back after the claim failed", t.errText(err))
		return
	}
	t.logf(ctx, slog.LevelInfo, "idempotency: claim given back after the claim failed")
}

// readMode reads the request's wait mode (Policy.InFlight.ModeHeader); a
// bad value is a 400 validation_error.
func (t *txn) readMode() *apierr.Error {
	name := t.g.cfg.Policy.InFlight.ModeHeader
	if name == "" || !t.in.hasHeaders() {
		return nil
	}
	vs := t.in.headerValues(name)
	if len(vs) == 0 {
		return nil
	}
	if len(vs) == 1 {
		switch strings.ToLower(strings.TrimSpace(vs[0])) {
		case ModeSync:
			return nil
		case ModeAsync:
			t.async = true
			return nil
		}
	}
	return apierr.New(400, apierr.CodeValidation, "The %s header must be %q or %q.", name, ModeSync, ModeAsync).
		WithDetails(map[string]any{"field": name})
}

// pendingAfterBudget reports whether a sync duplicate whose wait budget
// ended with the first request still executing is answered with the
// pending action, as an async one is at once: under a policy with a wait
// mode (Policy.InFlight.ModeHeader, the commerce policy, whose pending
// Action is answered as its mode says), on every adapter that answers with
// a response. Guard.Once, which has none to give, returns ErrInFlight.
func (t *txn) pendingAfterBudget() bool {
	return t.g.cfg.Policy.InFlight.ModeHeader != "" && t.in.method != methodEvent
}

// pending answers an async duplicate of a pending request at once, and a
// sync one whose budget ended (pendingAfterBudget): 202
// Accepted with the pending action and Retry-After, marked by the policy's
// replay headers (the answer is the first request's action, nothing new ran).
func (t *txn) pending(ctx context.Context, rec *Record) *Response {
	t.claimOutcome(outcomeInFlight)
	t.logf(ctx, slog.LevelInfo, "idempotency: pending", slog.String("outcome", OutcomeInFlight))
	if resp, ok := t.replayObject(ctx, rec, nil, 0); ok {
		return resp
	}
	body, _ := json.Marshal(map[string]string{"status": "pending", "requestId": rec.RequestID})
	resp := &Response{Status: 202, Body: body, Headers: map[string][]string{
		"Content-Type":   {"application/json"},
		HeaderRetryAfter: {strconv.Itoa(t.g.retryAfter(rec, t.g.clock.Now()))},
	}}
	return t.decorate(resp, true, rec.RequestID)
}

type action int

const (
	actReplay action = iota
	actMismatch
	actInFlight
	actClaim
	actLost // the record is final, and the store no longer holds its whole response (ErrNotKept, in t.storeErr)
)

// waitBudget returns how long a duplicate may wait for the first
// request's outcome: Config.Wait, bounded by the context's deadline (wall
// time) less WaitMargin; 0 when it does not wait.
func (g *Guard) waitBudget(ctx context.Context) time.Duration {
	if g.cfg.Wait < 0 || g.cfg.Policy.InFlight.NoWait {
		return 0
	}
	b := g.cfg.Wait
	if left, ok := clock.Remaining(ctx); ok {
		b = min(b, left-g.cfg.WaitMargin)
	}
	return max(b, 0)
}

// inspect decides what to do with an existing record, polling the store
// with bounded backoff while it is pending and live, until the wait budget
// is spent: the time slept on the Guard's clock, and never past the
// context's deadline less WaitMargin.
func (t *txn) inspect(ctx context.Context, cur Record, budget *time.Duration) (action, Record) {
	backoff := 20 * time.Millisecond
	for {
		if cur.Digest != t.digest {
			full, replay := mutantRecord(ctx, t, cur)
			if !replay {
				return actMismatch, cur
			}
			cur = full
		}
		if cur.State.Final() {
			return actReplay, cur
		}
		rem := *budget
		if left, ok := clock.Remaining(ctx); ok {
			rem = min(rem, left-t.g.cfg.WaitMargin)
		}
		if rem <= 0 {
			return actInFlight, cur
		}
		d := min(backoff, rem)
		d = max(d/2+rand.N(d/2+1), 1) // never 0: the budget always shrinks
		*budget -= d
		if t.g.clock.Sleep(ctx, d) != nil {
			return actInFlight, cur
		}
		backoff = min(2*backoff, 500*time.Millisecond)
		now := t.g.clock.Now()
		wall := t.g.wallAt(now)
		gctx := t.g.storeCtxAt(t.callSlot(), ctx, false, wall.Add(*budget), wall) // the poll ends with the wait
		// cut: the poll's deadline is the wait's end (or the request's),
		// sooner than the store timeout would have given it.
		cut := gctx.deadline.Before(wall.Add(t.g.cfg.StoreTimeout))
		r, found, err := t.g.cfg.Store.Get(gctx, t.id, now)
		gctx.release()
		if err != nil {
			if errors.Is(err, ErrNotKept) {
				t.storeErr = err
				return actLost, cur
			}
			if clientGone(ctx, err) {
				continue
			}
			if cut && errors.Is(err, context.DeadlineExceeded) {
				// The wait ran out while the poll was out: not the
				// store's failure, and the wait is over.
				t.logf(ctx, slog.LevelDebug, "idempotency: the wait for the in-flight request ended before its poll was answered",
					slog.Int64("wait_ms", t.g.cfg.Wait.Milliseconds()))
				return actInFlight, cur
			}
			t.logf(ctx, slog.LevelWarn, "idempotency: poll failed", t.errText(err))
			continue
		}
		if !found || (r.Digest == t.digest && r.Reclaimable(t.digest, now)) {
			if t.waitEndsInFlight() && (!found || r.State != StatePending) {
				// The request it waited on ended with an outcome the
				// record does not keep (released for a retry, or
				// forgotten): not a response to replay, and running the
				// handler here would process both of two concurrent
				// requests. An owner that died (its lease ended) is
				// still taken over.
				if found {
					cur = r
				} else {
					// Gone: nothing to wait for, so Retry-After is the
					// poll interval, never the dead lease's end.
					cur.State = StateRetryableFailure
				}
				return actInFlight, cur
			}
			return actClaim, r
		}
		cur = r
	}
}

// waitEndsInFlight reports whether a duplicate that waited on a request
// whose outcome the record does not keep (a 429 or 5xx released for a
// retry, a request rejected at the door and forgotten, a handler error) is
// answered 409 idempotency_in_flight rather than running the handler
// itself: the OpenWOP rule that of two concurrent same-key requests
// exactly one is processed, the other getting the winner's final response
// or 409 in flight. It holds for HTTP requests under a policy without a
// wait mode (Policy.InFlight.ModeHeader: the commerce policy's duplicate
// waits on the pending action, and a request rejected at the door leaves
// it a fresh run); Guard.Once's waiter runs its work itself.
func (t *txn) waitEndsInFlight() bool {
	return t.g.cfg.Policy.InFlight.ModeHeader == "" && t.in.method != methodEvent
}

func (t *txn) replay(ctx context.Context, rec *Record) *Response {
	_, span := t.span(ctx, spanReplay)
	defer t.endSpan(span, OutcomeReplay, nil)
	t.claimOutcome(outcomeReplay)
	t.logf(ctx, slog.LevelDebug, "idempotency: replay", slog.String("outcome", OutcomeReplay), slog.Int("attempt", rec.Attempt))
	c := rec.Response
	if c == nil { // a final record always has a response; never a panic
		return t.fail(internalError())
	}
	// The record is the caller's (Store.Claim, Store.Get): its response
	// takes the policy's headers in place, and its body, when the answer
	// still has those bytes, becomes the adapter's body string uncopied.
	c = t.acceptedCoding(ctx, c)
	stored := c.Body
	resp := t.decorate(t.render(c), true, rec.RequestID)
	if len(stored) > 0 && len(resp.Body) == len(stored) && &resp.Body[0] == &stored[0] {
		t.in.replayText = bodyString(resp.Body)
	}
	return resp
}

// notKept answers a duplicate of a request whose response was not kept
// (Response.NotKept): 410 CodeResponseNotKept, with the original status
// and the response's size in details and the policy's replay headers,
// never a re-run (Guard.Once maps it to ErrNotKept).
func (t *txn) notKept(ctx context.Context, rec *Record) *Response {
	_, span := t.span(ctx, spanReplay)
	defer t.endSpan(span, OutcomeReplay, nil)
	t.claimOutcome(outcomeReplay)
	r := rec.Response
	t.logf(ctx, slog.LevelInfo, "idempotency: replay of a response that was not kept", slog.String("outcome", OutcomeReplay),
		slog.Int("attempt", rec.Attempt), slog.Int("status", r.Status), slog.Int("size", r.NotKept))
	e := apierr.New(410, CodeResponseNotKept,
		"The request with this idempotency key was processed, but its response (%d bytes) was not kept (a body over %d bytes, an answer over the 6 MB payload Lambda returns, an answer the server could not read, or one the idempotency store refused): it cannot be replayed, and the request is not run again.",
		r.NotKept, MaxResponseBytes).WithDetails(map[string]any{"status": r.Status, "size": r.NotKept})
	t.failCode = e.Code
	return t.decorate(t.g.errorResponse(e, t.in.requestID), true, rec.RequestID)
}

// responseLost answers a duplicate of a request whose final record the
// store holds without all of its response (ErrNotKept: a part kept
// beside the record is gone): 410 CodeResponseNotKept, as for a response
// not kept, since the request was processed and its answer is gone for
// good: never a re-run, never an answer made up, and not the 500 or 503
// a retry would meet again. Logged as an error: the store lost data.
// firstRequestID is the first request's id when the store told it.
func (t *txn) responseLost(ctx context.Context, err error, firstRequestID string) *Response {
	_, span := t.span(ctx, spanReplay)
	defer t.endSpan(span, OutcomeReplay, nil)
	t.claimOutcome(outcomeReplay)
	t.logf(ctx, slog.LevelError, "idempotency: replay of a response the store no longer holds whole", slog.String("outcome", OutcomeReplay), t.errText(err))
	e := apierr.New(410, CodeResponseNotKept,
		"The request with this idempotency key was processed, but the idempotency store no longer holds its whole response: it cannot be replayed, and the request is not run again.")
	t.failCode = e.Code
	return t.decorate(t.g.errorResponse(e, t.in.requestID), true, firstRequestID)
}

// notKeptOutcome is what a completion records for resp when its body is
// not kept: the status and the body's size (Response.NotKept), or for an
// empty body the size of its stored form.
func notKeptOutcome(resp *Response) *Response {
	size := len(resp.Body)
	if size == 0 {
		// An empty body refused for its headers (beyond the room every
		// store keeps beside the body): the size is its stored form's,
		// which is positive, so it is recorded as not kept too.
		size = respsize.Encoded(resp.Status, resp.Headers, 0)
	}
	return &Response{Status: resp.Status, NotKept: size}
}

// execute runs the handler of the claim res, whose lease ends at until on
// the Guard's clock (the claim's LeaseExpires as written) and at leaseEnd
// in wall time, renewed by a heartbeat when renew is set.
func (t *txn) execute(ctx context.Context, res ClaimResult, renew bool, until, leaseEnd time.Time, run handlerFunc) *Response {
	g := t.g
	rec := res.Record
	// The writes that end this attempt (completion, release) store its
	// raw body's hash, taken before the handler sees the body.
	rec.RawBodySHA256 = t.rawBodySHA256()
	reclaimed := res.Decision == Reclaimed
	if reclaimed {
		t.claimOutcome(outcomeReclaimed)
		if res.LeaseExpired {
			g.count(MetricReclaims, "")
		}
		t.logf(ctx, slog.LevelInfo, "idempotency: reclaimed", slog.String("outcome", OutcomeReclaimed), slog.Int("attempt", rec.Attempt))
	} else {
		t.claimOutcome(outcomeClaimed)
		t.logf(ctx, slog.LevelDebug, "idempotency: claimed", slog.String("outcome", OutcomeClaimed))
	}
	x := new(execution)
	t.x = x
	x.leaseEnd = leaseEnd
	cs := &x.cs
	cs.info = ClaimInfo{ID: t.id, Attempt: rec.Attempt, Reclaimed: reclaimed, OriginalRequestID: rec.RequestID}
	x.values = claimValues{Context: ctx, claim: cs, decoded: t.decoded}
	hctx := context.Context(&x.values)
	var hb *heartbeat
	if renew {
		hctx, hb = t.startHeartbeat(&x.values, until, rec.Expires)
	}
	// A handler whose goroutine ends in runtime.Goexit (testing's FailNow
	// called in a handler, a library ending its goroutine so) never
	// returns here: safeCall recovers a panic, not that. The deferred call
	// then stops the heartbeat and releases the claim as for a handler
	// that panicked, so that no lease renewed for as long as the process
	// lives holds the key (RED_TEAM 428).
	returned := false
	defer func() {
		if !returned {
			t.goexited(ctx, rec, hb)
		}
	}()
	resp, err := safeCall(hctx, run)
	returned = true
	if hb != nil {
		hb.stop()
	}
	// An answer the Guard cannot read came from a handler that ran to its
	// end, its work done: it is the attempt's outcome, as a response
	// (recorded as not kept, or released or forgotten as its status says),
	// never an error released for a re-run.
	// (safeCall and the adapters return it as it is: a type assertion,
	// where errors.As would take an allocation of every execution.)
	unread, _ := err.(*unreadableError)
	if unread != nil {
		resp, err = unread.resp, nil
	}
	// The writes after the claim run without the request's cancellation,
	// each bounded (Guard.storeCtx) by the request's deadline, the lease
	// and Config.StoreTimeout.
	now := g.clock.Now()
	wctx := g.storeCtxAt(&x.call, ctx, true, x.leaseEnd, g.wallAt(now))
	defer wctx.release()
	if err != nil && clientGone(ctx, err) {
		t.release(wctx, rec, now)
		return t.clientClosed(ctx, "handler")
	}
	if err != nil && hb != nil && hb.lost() {
		return t.stoppedLeaseLost(ctx, wctx, rec, now, err)
	}
	if err != nil {
		t.logFailure(ctx, slog.LevelError, "idempotency: handler failed; record left retryable",
			t.errText(err), stackAttr(err), slog.Int("attempt", rec.Attempt), slog.String("outcome", logOutcomeHandlerError))
		t.release(wctx, rec, now)
		return t.fail(internalError())
	}
	cls, state := Replay, StateTerminalFailure // an answer without a status
	if unread == nil || resp.Status != 0 {
		cls, state = g.classify(resp)
	}
	switch cls {
	case Retry:
		t.release(wctx, rec, now)
		return t.answer(ctx, resp, rec, unread, false)
	case Forget:
		if err := g.cfg.Store.Delete(wctx, t.id, t.owner, now); err != nil {
			t.writeFailed(ctx, "delete", err)
		}
		return t.answer(ctx, resp, rec, unread, false)
	}
	writes := cs.takeWrites()
	out := Outcome{State: state, Response: cacheableInto(&x.cached, resp), Expires: g.expires(now), Writes: writes}
	if len(resp.Body) > MaxResponseBytes || resp.NotKept > 0 || unread != nil {
		// Too large to keep (or, from Guard.Once, a value its adapter
		// could not encode): the outcome recorded is that the handler
		// ran, with its status and size, so that no duplicate runs it
		// again; the caller still gets the true response.
		out.Response = notKeptOutcome(resp)
	}
	sctx, span := t.span(wctx, spanComplete)
	err = g.cfg.Store.Complete(sctx, rec, out, now)
	var refused error // the store's refusal of the response, when recorded not kept
	if out.Response.NotKept == 0 && (errors.Is(err, ErrTooLarge) || (len(writes) == 0 && (refusedFinally(err) || errors.Is(err, ErrRecordNotSent)))) {
		// A store that keeps less than this response (ErrTooLarge, which
		// wrote nothing, Transact writes included: Outcome.Validate is
		// its first step), or refuses it for good for another reason (a
		// validation or permission error: no outage to wait out) when
		// the completion carries no Transact writes (whose own items may
		// be what it refuses), records the not-kept outcome instead: the
		// handler ran, and no retry may run it again. (Fenced, as every
		// completion: should the refusal have been written after all,
		// this one is refused, and the response stays.) So does one
		// whose write of the record was never sent (ErrRecordNotSent: the
		// response's part kept beside the record could not be written,
		// throttled past the retries, say; RED_TEAM 419): the record is
		// still this claim's, and left so it would run the handler again
		// once the lease ends; the not-kept outcome is one small write on
		// the record's own item, made on this failure path only.
		refused = err
		out.Response = notKeptOutcome(resp)
		nctx := sctx
		if errors.Is(err, ErrRecordNotSent) && sctx.Err() != nil {
			// Not sent because the call's deadline passed (the store
			// stalled): the not-kept write gets a deadline of its own,
			// bounded as the first was (RED_TEAM 420), not one that
			// fails it unsent.
			fresh := g.storeCtx(t.callSlot(), ctx, true, x.leaseEnd)
			defer fresh.release()
			nctx = fresh
		}
		err = g.cfg.Store.Complete(nctx, rec, out, now)
	}
	t.endSpan(span, completeSpanOutcome(err), err)
	if err != nil && len(writes) > 0 && storeUnavailable(err) {
		// With Transact writes, nothing of the handler's writes committed
		// unless the completion did. It may have, every answer of it lost
		// (a transaction applied while the client timed out, or whose
		// every retry's answer was reset): the release, fenced by this
		// claim's owner token, is refused then, and the record read back
		// says whether this claim's own completion is what holds it.
		t.writeFailed(ctx, "complete", err)
		if !t.completionWritten(ctx, rec, out.State, now, err) {
			t.storeErr = err // Once: ErrNotCommitted, wrapping why
			return t.unavailable()
		}
		t.logf(ctx, slog.LevelWarn, "idempotency: completion whose answer was lost found written; its writes committed")
		err = nil
	}
	if err != nil && len(writes) == 0 && storeUnavailable(err) && t.ownCompletion(ctx, out.State, clock.Wall().Add(lostClaimRelease)) {
		// Without Transact writes the record stays claimed after a
		// failed completion (the handler's effects happened), so nothing
		// is refused to tell a completion that landed with every answer
		// lost: one read of the record, bounded as the claim's give-back
		// is (the store is failing, and the 503 waits for it), tells it,
		// and the first caller gets the true response rather than a 503
		// whose retry could only be the replay (or, for a response not
		// kept, 410).
		t.writeFailed(ctx, "complete", err)
		t.logf(ctx, slog.LevelWarn, "idempotency: completion whose answer was lost found written")
		err = nil
	}
	switch {
	case err == nil:
		switch {
		case unread != nil:
			return t.answer(ctx, resp, rec, unread, true)
		case refused != nil && errors.Is(refused, ErrRecordNotSent):
			t.logf(ctx, slog.LevelError, "idempotency: store could not write the response, recorded as not kept",
				t.errText(refused), slog.Int("status", resp.Status), slog.Int("size", out.Response.NotKept))
		case refused != nil && !errors.Is(refused, ErrTooLarge):
			t.logf(ctx, slog.LevelError, "idempotency: store refused the response, recorded as not kept",
				t.errText(refused), slog.Int("status", resp.Status), slog.Int("size", out.Response.NotKept))
		case resp.NotKept > 0 && t.in.overLambda:
			// An answer Lambda cannot return (its payload over 6 MB):
			// this caller gets a 502 from API Gateway, its duplicates 410.
			t.logf(ctx, slog.LevelWarn, "idempotency: response larger than a Lambda payload carries, recorded as not kept",
				slog.Int("status", resp.Status), slog.Int("size", out.Response.NotKept))
		case resp.NotKept > 0:
			// A value Guard.Once's adapter could not encode: a defect of
			// the function's value type, worth an operator's look.
			t.logf(ctx, slog.LevelWarn, "idempotency: value could not be encoded, recorded as not kept")
		case out.Response.NotKept > 0:
			// Day two: a route whose answers outgrow the store is worth an
			// operator's look (its duplicates get 410, never the answer).
			t.logf(ctx, slog.LevelWarn, "idempotency: response larger than the store keeps, recorded as not kept",
				slog.Int("status", resp.Status), slog.Int("size", out.Response.NotKept))
		}
		t.in.ownAnswer = true
		return t.decorate(t.render(resp), false, rec.RequestID)
	case storeUnavailable(err):
		// The outcome may or may not have been written, and there are no
		// Transact writes (those are decided above: released, or found
		// written): the handler's effects happened, the record stays
		// claimed, and the lease and fence rules decide what a retry sees
		// (in flight, or the replay if the completion landed although the
		// read back above did not find it). A 503.
		if refused != nil {
			t.writeFailed(ctx, "complete", refused) // the response's own write (ErrRecordNotSent)
		}
		t.writeFailed(ctx, "complete", err)
		t.unrecorded = true
		return t.unavailable()
	case errors.Is(err, ErrFenced):
		t.writeFailed(ctx, "complete", err)
		return t.takenOver()
	case errors.Is(err, ErrWriteConflict), len(writes) > 0:
		// Guard.Once has no response to answer with: its cancelled
		// completion stays ErrNotCommitted.
		if t.in.method != methodEvent {
			if alt, cause := cs.conflictAnswer(wctx, err); alt != nil {
				return t.answerConflict(ctx, wctx, rec, alt, err, cause, now)
			}
		}
		t.storeErr = err
		t.writeFailed(ctx, "complete", err)
		t.release(wctx, rec, now)
		return t.fail(internalError())
	default:
		// The handler's effects happened but the outcome was not recorded
		// (the store failed, or refused even the not-kept outcome).
		// Release the record when the store said its response was too
		// large (nothing of it written) so a retry is not blocked, and
		// return the true response. Refused otherwise, the record stays
		// claimed: a retry is in flight until the lease ends.
		if refused != nil && !errors.Is(refused, ErrTooLarge) {
			t.writeFailed(ctx, "complete", refused)
		}
		t.writeFailed(ctx, "complete", err)
		if errors.Is(err, ErrTooLarge) {
			t.release(wctx, rec, now)
		}
		return t.answer(ctx, resp, rec, unread, false)
	}
}

// goexited ends the attempt of rec whose handler ended its goroutine
// (runtime.Goexit) instead of returning, on that goroutine's way out: the
// heartbeat hb (nil when none runs) is stopped and the record released
// for a retry, as after a handler's panic. Nobody is answered: the
// goroutine that would answer is ending.
func (t *txn) goexited(ctx context.Context, rec Record, hb *heartbeat) {
	if hb != nil {
		hb.stop()
	}
	now := t.g.clock.Now()
	wctx := t.g.storeCtxAt(&t.x.call, ctx, true, t.x.leaseEnd, t.g.wallAt(now))
	defer wctx.release()
	// Logged here whatever the adapter (an adapter that logs each failed
	// record itself, SQS's, never gets to: its goroutine is ending too).
	t.logf(ctx, slog.LevelError, "idempotency: handler ended its goroutine without returning (runtime.Goexit); record left retryable",
		slog.Int("attempt", rec.Attempt), slog.String("outcome", logOutcomeHandlerError))
	t.release(wctx, rec, now)
}

// completionWritten releases rec after its completion with Transact writes
// failed as a store outage, unless that completion landed after all,
// which it reports: the release is refused (ErrFenced) and the record,
// read back, is final in state under this claim's owner token, which only
// this claim's completion writes. A release that lands says the
// completion did not (the completion is fenced by the same token, so a
// late one is refused). A release that fails as an outage too (its
// answers lost with the completion's, as in a partition) says nothing:
// the record is read back all the same, bounded as the claim's give-back
// is, since the store is failing and the 503 waits for it. A read that
// fails leaves it unknown, reported as not landed. A completion whose
// error, cerr, says its write was never sent (ErrRecordNotSent) did not
// land: it is released, and nothing is read back. It runs on that error
// path only: a completion that succeeds makes neither call.
func (t *txn) completionWritten(ctx context.Context, rec Record, state State, now time.Time, cerr error) bool {
	g := t.g
	rctx := g.storeCtx(t.callSlot(), ctx, true, time.Time{})
	err := g.cfg.Store.Release(rctx, rec, now)
	rctx.release()
	if err == nil {
		return false
	}
	if errors.Is(cerr, ErrRecordNotSent) {
		t.writeFailed(ctx, "release", err)
		return false
	}
	switch {
	case errors.Is(err, ErrFenced):
		if t.ownCompletion(ctx, state, time.Time{}) {
			return true
		}
	case storeUnavailable(err):
		if t.ownCompletion(ctx, state, clock.Wall().Add(lostClaimRelease)) {
			return true
		}
	}
	t.writeFailed(ctx, "release", err)
	return false
}

// ownCompletion reports whether the record holds this claim's own
// completion, read once (Store.Get, detached from the client's
// cancellation, bounded by limit when it is set): final in state under
// this claim's owner token, which only this claim's completion writes. A
// read that fails, or finds anything else, reports false; a record read
// whose response could not be (its chunk items throttled, say: Store.Get
// returns it found, beside the error) still says whose completion it
// holds, and this caller has the response in hand. It runs on the error
// paths after a completion that failed only.
func (t *txn) ownCompletion(ctx context.Context, state State, limit time.Time) bool {
	g := t.g
	gctx := g.storeCtx(t.callSlot(), ctx, true, limit)
	cur, found, _ := g.cfg.Store.Get(gctx, t.id, g.clock.Now())
	gctx.release()
	return found && cur.Owner == t.owner && cur.State == state
}

// answer is the answer to the request whose handler answered resp, with
// rec its claim: resp itself, rendered and decorated, unless the Guard
// could not read it (unread): then 500 internal_error, which says that
// the request is not run again when recorded is set (its outcome written,
// not kept), else what is said to a handler error (its record released
// or forgotten as its status says, or its outcome not written). Either way
// the unreadable answer is logged, an error of the handler's to fix.
func (t *txn) answer(ctx context.Context, resp *Response, rec Record, unread *unreadableError, recorded bool) *Response {
	if unread == nil {
		t.in.ownAnswer = true
		return t.decorate(t.render(resp), false, rec.RequestID)
	}
	if !recorded {
		t.logFailure(ctx, slog.LevelError, "idempotency: handler's answer could not be read",
			t.errText(unread), slog.Int("attempt", rec.Attempt), slog.String("outcome", logOutcomeHandlerError))
		return t.fail(internalError())
	}
	t.logf(ctx, slog.LevelError, "idempotency: handler's answer could not be read; the request ran, recorded as not kept",
		t.errText(unread), slog.Int("attempt", rec.Attempt), slog.Int("status", resp.Status), slog.Int("size", len(resp.Body)))
	return t.fail(apierr.New(500, "internal_error",
		"The request was processed, but the handler's answer could not be read: it cannot be given, and the request is not run again."))
}

// refusedFinally reports whether err, a completion's error, is the store
// refusing it for good, so that a smaller completion (the not-kept
// outcome) may land: any error but an outage (storeUnavailable), a fence,
// a write's conflict, a table the store cannot use
// (ErrStoreMisconfigured) and a cancellation.
func refusedFinally(err error) bool {
	return err != nil && !storeUnavailable(err) && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrWriteConflict) &&
		!errors.Is(err, ErrStoreMisconfigured) && !errors.Is(err, context.Canceled)
}

// answerConflict answers alt, the handler's answer (OnConflict) to the
// cause of its completion cancelled with conflict (TransactOr): nothing of
// its writes committed, and the record ends as the policy says for alt
// (Cache), as it would for the handler's own response: a forgotten answer
// deletes it, a retryable one releases it, a final one is recorded
// without the writes (as not kept when the store refuses it for good, as
// in execute; 409 in flight when that write is fenced; released, with alt
// answered, when it fails otherwise). An answered conflict is the
// host's own outcome, logged at info, not as a failed store write.
func (t *txn) answerConflict(ctx context.Context, wctx context.Context, rec Record, alt *Response, conflict, cause error, now time.Time) *Response {
	g := t.g
	t.logf(ctx, slog.LevelInfo, "idempotency: completion cancelled by a write's condition, answered by the handler",
		t.errText(conflict), slog.String("cause", t.redacted(cause)),
		slog.Int("status", alt.Status))
	switch cls, state := g.classify(alt); cls {
	case Retry:
		t.release(wctx, rec, now)
	case Forget:
		if err := g.cfg.Store.Delete(wctx, t.id, t.owner, now); err != nil {
			t.writeFailed(ctx, "delete", err)
		}
	default:
		out := Outcome{State: state, Response: cacheableInto(&t.x.cached, alt), Expires: g.expires(now)}
		if len(alt.Body) > MaxResponseBytes || t.in.overLambdaAnswer(alt) {
			// Too large to keep, or for Lambda to return (its payload
			// over 6 MB, as the handler's own answer is measured):
			// recorded as not kept, its duplicates answered 410, never
			// a replay that fails the same way on every retry.
			out.Response = notKeptOutcome(alt)
			if len(alt.Body) <= MaxResponseBytes {
				t.logf(ctx, slog.LevelWarn, "idempotency: response larger than a Lambda payload carries, recorded as not kept",
					slog.Int("status", alt.Status), slog.Int("size", out.Response.NotKept))
			}
		}
		err := g.cfg.Store.Complete(wctx, rec, out, now)
		if out.Response.NotKept == 0 && refusedFinally(err) {
			// Refused for good (too large for the store, say): recorded
			// as not kept, as the handler's own response would be, so
			// that no retry runs the handler again.
			t.writeFailed(ctx, "complete", err)
			out.Response = notKeptOutcome(alt)
			err = g.cfg.Store.Complete(wctx, rec, out, now)
		}
		if err != nil {
			t.writeFailed(ctx, "complete", err)
			if errors.Is(err, ErrFenced) {
				return t.takenOver()
			}
			t.release(wctx, rec, now)
		}
	}
	return t.decorate(t.render(alt), false, rec.RequestID)
}

// takenOver is the answer to a request whose claim another invocation
// took over (its completion or release fenced): 409 in flight, with
// Retry-After.
func (t *txn) takenOver() *Response {
	r := t.fail(apierr.New(409, apierr.CodeIdempotencyInFlight,
		"This request's claim was taken over by another invocation; retry it with the same Idempotency-Key."))
	r.Headers[HeaderRetryAfter] = []string{strconv.Itoa(int(math.Ceil(t.g.cfg.InFlightRetryAfter.Seconds())))}
	return r
}

// stoppedLeaseLost answers a handler that returned an error after its
// context ended with ErrLeaseLost (its lease fenced, or cut when renewals
// failed): the record is released (fenced when another invocation took
// it over) so that a retry runs at once; the answer is 409 in flight when
// it was taken over, else 503 CodeStoreUnavailable (the store failed the
// renewals), both with Retry-After, never a 500.
func (t *txn) stoppedLeaseLost(ctx context.Context, wctx context.Context, rec Record, now time.Time, err error) *Response {
	t.logFailure(ctx, slog.LevelWarn, "idempotency: handler stopped after its lease was lost",
		t.errText(err), slog.Int("attempt", rec.Attempt), slog.String("outcome", logOutcomeLeaseLost))
	if rerr := t.g.cfg.Store.Release(wctx, rec, now); rerr != nil {
		t.writeFailed(ctx, "release", rerr)
		if errors.Is(rerr, ErrFenced) {
			return t.takenOver()
		}
	}
	return t.unavailable()
}

func (t *txn) writeFailed(ctx context.Context, op string, err error) {
	if errors.Is(err, ErrFenced) {
		t.g.count(MetricLeaseLostWrites, "")
		t.logf(ctx, slog.LevelWarn, "idempotency: fenced write rejected (lease lost)", slog.String("write", op), slog.String("outcome", logOutcomeLeaseLost))
		return
	}
	t.logf(ctx, slog.LevelError, "idempotency: store write failed", slog.String("write", op), t.errText(err), storeOutcome(err))
}

// release gives back the claim rec (Store.Release): the record is left
// retryable, with the attempt's raw body hash.
func (t *txn) release(ctx context.Context, rec Record, now time.Time) {
	if err := t.g.cfg.Store.Release(ctx, rec, now); err != nil {
		t.writeFailed(ctx, "release", err)
	}
}

// callSlot returns the storage of the next store call's context (see
// txn.slot), or nil when it is used up or there is none (Guard.storeCtx
// allocates one). Only the request's own goroutine calls it: no two calls
// share a slot.
func (t *txn) callSlot() *callCtx {
	c := t.slot
	t.slot = nil
	return c
}
