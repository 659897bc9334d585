package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Transport is an http.RoundTripper that makes mutating requests safe to
// retry: one idempotency key per logical call, the same key and body on every
// attempt, bounded retries of transport errors, 429, 5xx and 409
// idempotency_in_flight (see the package documentation). The zero value uses
// the defaults of Config. A Transport is safe for concurrent use; its Config
// must not be changed once it is in use.
type Transport struct {
	Config Config
}

// NewTransport validates cfg and returns a Transport using it.
func NewTransport(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Transport{Config: cfg}, nil
}

// ErrBudgetExhausted is joined into the *Error of a call whose MaxElapsed
// ran out while an attempt was waiting for response headers (or while the
// body of a 409 or 5xx was being read for its error code), before a
// redirect hop of Client.Do could make its first attempt, or whose attempts
// all failed without an answer and whose next wait would end past
// MaxElapsed (past the context's deadline instead, when that is sooner:
// the error then matches context.DeadlineExceeded). It never replaces
// an answer that arrived: one whose headers (and, for a 409 or 5xx, error
// code) are in is delivered.
var ErrBudgetExhausted = errors.New("client: retry time budget exhausted")

// errDeadlineAhead ends a call whose next wait would end past its context's
// deadline: it matches context.DeadlineExceeded, which the context is bound
// to report by the end of that wait.
var errDeadlineAhead = fmt.Errorf("client: the next retry would start past the request's deadline: %w", context.DeadlineExceeded)

// Error is the error of a mutating call that ended without a response:
// every attempt failed before response headers arrived, or the context ended
// (or MaxElapsed ran out) during an attempt, a wait or between redirect hops.
// http.Client wraps it in a *url.Error; use errors.As to get it.
type Error struct {
	Key      string // the idempotency key every attempt carried
	Attempts int    // attempts started
	Err      error  // the last cause
}

func (e *Error) Error() string {
	return fmt.Sprintf("client: idempotent call failed after %d attempt(s): %v", e.Attempts, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Mutating reports whether requests with this method get an idempotency key
// and retries: every method except GET, HEAD, OPTIONS, TRACE and CONNECT.
// "" is GET, as for any net/http client request.
func Mutating(method string) bool {
	switch strings.ToUpper(method) {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodConnect:
		return false
	}
	return true
}

// IsReplay reports whether h carries one of the replay markers (value "true",
// any case). With no names it checks DefaultReplayHeaders.
func IsReplay(h http.Header, names ...string) bool {
	if len(names) == 0 {
		names = DefaultReplayHeaders
	}
	return marked(h, names)
}

// marked reports whether h carries one of the replay markers names (none
// when names is empty: the Transport's Config.ReplayHeaders, an empty list
// of which recognises no marker, RED_TEAM 483).
func marked(h http.Header, names []string) bool {
	for _, n := range names {
		if strings.EqualFold(strings.TrimSpace(h.Get(n)), "true") {
			return true
		}
	}
	return false
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.Config.withDefaults()
	rec, _ := req.Context().Value(resultCtx{}).(*Result)
	// cs links the hops (redirects) of one Client.Do call.
	cs, _ := req.Context().Value(callCtx{}).(*callState)
	if cs == nil {
		cs = &callState{}
	}
	if !Mutating(req.Method) {
		resp, err := c.Base.RoundTrip(req)
		cs.attempts++
		cs.replayed = cs.replayed || err == nil && marked(resp.Header, c.ReplayHeaders)
		if rec != nil {
			*rec = Result{Key: cs.key, Attempts: cs.attempts, Replayed: cs.replayed}
		}
		return resp, err
	}
	if err := t.Config.Validate(); err != nil {
		closeReqBody(req)
		return nil, err
	}

	key := headerValue(req.Header, c.KeyHeader)
	if key == "" {
		key = keyFrom(req.Context())
	}
	if key == "" {
		key = cs.key // minted for an earlier hop of this call
	}
	if key == "" {
		key = c.NewKey()
	}
	cs.key = key
	res := Result{Key: key, Attempts: cs.attempts}
	prior := cs.attempts // attempts of earlier hops
	// polls counts in-flight answers with Retry-After, which MaxAttempts
	// does not count; the hops of one call share it, as they share the
	// attempts and MaxElapsed.
	polls := cs.polls
	defer func() {
		cs.attempts, cs.replayed, cs.polls = res.Attempts, res.Replayed, polls
		if rec != nil {
			*rec = res
		}
	}()

	body, length, err := replayableBody(req)
	if err != nil {
		return nil, &Error{Key: key, Err: err}
	}

	if cs.start.IsZero() {
		cs.start = c.Now()
	}
	deadline := cs.start.Add(c.MaxElapsed)
	budget := deadline.Sub(c.Now()) // less than MaxElapsed on a later hop
	if budget <= 0 {
		return nil, &Error{Key: key, Attempts: res.Attempts, Err: ErrBudgetExhausted}
	}
	// giveUp is why the call stops when the next wait would end past the
	// deadline: the budget, or the context's deadline when that is sooner.
	giveUp := ErrBudgetExhausted
	if d, ok := req.Context().Deadline(); ok && d.Before(deadline) {
		deadline = d
		giveUp = errDeadlineAhead
	}
	// ctx carries every attempt; the budget timer cancels an attempt still
	// waiting for headers (or a wait) when MaxElapsed runs out. From the
	// moment an attempt's answer is in hand (holding) until it is delivered
	// or let go for a retry, the timer only records that the budget ran
	// out: cancelling ctx then would break the body of an answer that
	// arrived. On success ctx lives on until the caller closes (or drains)
	// the body.
	ctx, cancel := context.WithCancel(req.Context())
	var (
		mu      sync.Mutex
		spent   bool
		stopped bool
		holding bool
	)
	timer := time.AfterFunc(budget, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			spent = true
			if !holding {
				cancel()
			}
		}
	})
	// hold marks whether an answer is in hand, and reports whether the
	// budget has run out; letting go of an answer after it ran out cancels
	// ctx, as the timer would have.
	hold := func(on bool) bool {
		mu.Lock()
		defer mu.Unlock()
		holding = on
		if !on && spent && !stopped {
			cancel()
		}
		return spent
	}
	// stopTimer disarms the budget timer and reports whether it had fired.
	stopTimer := func() bool {
		timer.Stop()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		return spent
	}
	fail := func(cause error) (*http.Response, error) {
		if stopTimer() && !errors.Is(cause, ErrBudgetExhausted) {
			cause = errors.Join(ErrBudgetExhausted, cause)
		}
		cancel()
		return nil, &Error{Key: key, Attempts: res.Attempts, Err: cause}
	}

	for {
		res.Attempts++
		r := req.Clone(ctx)
		if r.Header == nil {
			// A request built by hand (http.Client gives every request
			// a map): the attempt's own, the caller's left as it is.
			r.Header = make(http.Header)
		}
		delHeader(r.Header, c.KeyHeader) // the caller's, under any spelling
		r.Header.Set(c.KeyHeader, key)
		r.ContentLength = length
		if r.Body, err = body(); err != nil {
			return fail(err)
		}
		if r.Body == nil {
			r.GetBody = nil
		} else {
			r.GetBody = body
		}

		resp, err := c.Base.RoundTrip(r)
		var (
			v      = retryable
			ra     time.Duration
			haveRA bool
		)
		if err != nil {
			if ctx.Err() != nil || permanent(err) {
				return fail(err)
			}
		} else {
			// The body read to classify the answer (a 409's or 5xx's
			// error code, the commerce policy's pending 202) is read
			// within the budget: one the budget cuts off never arrived
			// whole. From here on the answer is in hand.
			var cut bool
			v, cut = classify(resp, c.InFlightCodes)
			if marked(resp.Header, c.ReplayHeaders) {
				switch pending, whole := pendingAnswer(r, resp); {
				case cut:
					// A replay whose body broke off never arrived whole:
					// the same key meets the same recorded answer again.
				case v == retryable:
					// The server's recorded outcome for this key: a
					// retry under the same key can only replay it again.
					v = final
				case !whole:
					cut = true
					v = retryable // broke off: it never arrived whole
				case pending:
					v = inFlight // the commerce policy's in-flight answer
				}
			}
			if hold(true) && cut {
				// The budget ran out while its body was being read (and
				// broke it off): an answer that never arrived whole ends
				// the call as a transport error would.
				resp.Body.Close()
				return fail(errors.New("client: the answer's body broke off"))
			}
			ra, haveRA = RetryAfter(resp.Header.Get("Retry-After"), c.Now())
		}

		if v == inFlight && haveRA {
			// The server is working on this key and said when to look
			// again: a poll, bounded by the budget, not by MaxAttempts.
			polls++
		}
		if v == final || res.Attempts-polls >= c.MaxAttempts {
			if err != nil {
				return fail(err)
			}
			return t.deliver(resp, &res, &c, stopTimer, cancel)
		}
		wait := backoff(&c, res.Attempts-prior, ra, haveRA)
		if c.Now().Add(wait).After(deadline) {
			// The wait does not fit in the budget: the last answer stands,
			// or, when there is none, the error says the budget (or the
			// context's deadline) ended the call.
			if err != nil {
				return fail(errors.Join(giveUp, err))
			}
			return t.deliver(resp, &res, &c, stopTimer, cancel)
		}
		hold(false) // the budget bounds the drain and the wait again
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxPeek))
			resp.Body.Close()
		}
		serr := c.Sleep(ctx, wait)
		if serr == nil {
			// The wait's end and the context's can come at once (a
			// select picks either): a cancelled call makes no further
			// attempt, whatever its base does with the context
			// (RED_TEAM 481).
			serr = ctx.Err()
		}
		if serr != nil {
			if err == nil {
				err = serr
			} else {
				err = errors.Join(serr, err)
			}
			return fail(err)
		}
	}
}

// deliver hands the final response to the caller: the budget timer is
// disarmed and the attempt context is released when the body is closed or
// read to EOF. A response is delivered even when the budget ran out after
// it arrived: the server answered, and its answer is the call's outcome.
func (t *Transport) deliver(resp *http.Response, res *Result, c *Config, stopTimer func() bool, cancel context.CancelFunc) (*http.Response, error) {
	stopTimer()
	res.Replayed = marked(resp.Header, c.ReplayHeaders)
	if resp.Body == nil {
		cancel()
	} else {
		resp.Body = &releaseBody{rc: resp.Body, cancel: cancel}
	}
	return resp, nil
}

// replayableBody returns a function that yields a fresh copy of req's body
// for each attempt (nil when there is none), and the body's length. It uses
// req.GetBody when set and otherwise reads the body into memory once.
// req.Body is closed, as the RoundTripper contract requires.
func replayableBody(req *http.Request) (body func() (io.ReadCloser, error), length int64, err error) {
	if req.Body == nil || req.Body == http.NoBody {
		return func() (io.ReadCloser, error) { return nil, nil }, 0, nil
	}
	if req.GetBody != nil {
		req.Body.Close()
		return req.GetBody, req.ContentLength, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("client: reading request body: %w", err)
	}
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, int64(len(b)), nil
}

// headerValue returns the first value of the header name in h under any
// spelling of the name, or "". A header map is a plain map that a caller
// may fill under any spelling (http.Header{"idempotency-key": …}), and
// net/http sends every entry as it is spelled: a key set so is the
// caller's key all the same (RED_TEAM 479). The canonical spelling is
// looked at first, then the others in sorted order.
func headerValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	var names []string
	for k, v := range h {
		if len(v) > 0 && v[0] != "" && strings.EqualFold(k, name) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return h[names[0]][0]
}

// delHeader deletes the header name from h under every spelling.
func delHeader(h http.Header, name string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}

func closeReqBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// permanent reports transport errors that a retry cannot cure.
func permanent(err error) bool {
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	return errors.As(err, &cv) || errors.As(err, &rh)
}

type releaseBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
	once   sync.Once
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.once.Do(b.cancel)
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.cancel)
	return err
}
