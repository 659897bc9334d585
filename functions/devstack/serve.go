package devstack

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/internal/rawconn"
)

// serve runs st until ctx ends or serving fails: the stream pollers, the
// resumer and the status line, and the HTTP API on ln through the gateway.
// Once it serves, it prints the ready lines and calls served (start: when
// dev began, for the ready line's time). It stops everything it started
// before it returns the HTTP server's error, else nil: the requests in
// flight get shutdownGrace to finish, cut short when now is closed;
// waiting is called if they are still running after waitingNotice, cut if
// some were still running when the grace ended and were cut.
func (st *stack) serve(ctx context.Context, now <-chan struct{}, waiting, cut func(), ln net.Listener, start time.Time, served func()) error {
	o, stdout, logger, pollers, res, lag := st.o, st.stdout, st.logger, st.pollers, st.res, st.lag
	engine, endpoint := st.eng.engine, st.eng.endpoint
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pollers {
		wg.Add(1)
		go func() { defer wg.Done(); p.run(runCtx) }()
	}
	if st.feed != nil {
		wg.Add(1)
		go func() { defer wg.Done(); st.feed.run(runCtx) }()
	}
	// Parked runs (an effect's next attempt scheduled for later): the
	// executor runs those that are due, as the deployed function's minute
	// schedule does, at each wake time it reports and at least every
	// devIdleResume (resumer).
	wg.Add(1)
	go func() { defer wg.Done(); res.run(runCtx) }()
	wg.Add(1)
	go func() { defer wg.Done(); lag.run(runCtx, stdout, devStatusEvery) }()
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	// WriteTimeout leaves 30 s beyond the request timeout: every store call
	// of a request, the Layer-1 completion included, ends by the request's
	// deadline less the Guard's margin (idem.Config.StoreTimeout), so even a
	// stalled store's 503 is written long before the connection is cut.
	//
	// Requests run under their own context, not ctx: a stop (Ctrl-C,
	// SIGTERM) gives the requests in flight the shutdown's grace to finish
	// with their own answers (a cancelled one would be answered as if its
	// client had hung up, and leave its key claimed), and only then
	// cancels what is left.
	reqCtx, reqCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer reqCancel()
	gw := st.gateway(o.RequestTimeout)
	srv := &http.Server{Handler: gw,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: o.RequestTimeout + 30*time.Second,
		IdleTimeout: 2 * time.Minute, BaseContext: func(net.Listener) context.Context { return reqCtx }}
	// A stop ends the held event streams and the waiting long polls at once
	// (devsse.go; apifn.TestConfig.PollWaitEnds).
	srv.RegisterOnShutdown(gw.streams.close)
	// Each request gets its own header block as received (devraw.go).
	rawconn.Configure(srv)
	// A head cut short is answered 408 before its connection closes
	// (devconn.go).
	srv.ConnState = devConnState(srv.ConnState)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(devListener{ln}) }()
	if st.feed != nil {
		fmt.Fprintf(stdout, "idemkit dev: %s has no DynamoDB Streams: the executor runs what this process writes, and nothing is audited (use --emulator %s for the deployed stream mappings and the auditor)\n", engineName(engine), streamEngines())
	}
	base := baseURL(ln)
	if everyInterface(ln) {
		fmt.Fprintf(stdout, "idemkit dev: listening on every interface (%s); its links name %s\n", ln.Addr(), base)
	}
	fmt.Fprintf(stdout, "idemkit dev: serving %s (%s at %s, ready in %s); Ctrl-C stops\n", base, engineName(engine), shownURL(endpoint), time.Since(start).Round(time.Millisecond))
	if k0, _, ok := splitAPIKey(o.APIKeys[0]); ok && (st.k.Guard == nil || st.k.Guard.Config().Disabled) {
		// Layer 1 off (IDEMPOTENCY_ENABLED=false): a key is ignored and
		// every POST makes a run, so the line promises no replay.
		fmt.Fprintf(stdout, "try (idempotency is off: each POST makes a run): curl -si -X POST %s/runs -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"workflowId\":\"conformance-noop\"}'\n", base, k0)
	} else if ok {
		fmt.Fprintf(stdout, "try (twice: the second answer is a replay): curl -si -X POST %s/runs -H 'Authorization: Bearer %s' -H 'Idempotency-Key: %s' -H 'Content-Type: application/json' -d '{\"workflowId\":\"conformance-noop\"}'\n", base, k0, newUUID())
	}

	served()

	var result error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		result = err
	}
	logger.Info("dev: shutting down")
	shCtx, shCancel := context.WithTimeout(context.Background(), shutdownGrace)
	shDone := make(chan struct{})
	go func() {
		select {
		case <-now: // StopNow: no grace
			shCancel()
		case <-shCtx.Done():
		}
	}()
	go func() {
		select {
		case <-time.After(waitingNotice):
			waiting()
		case <-shDone:
		}
	}()
	shErr := srv.Shutdown(shCtx)
	close(shDone)
	if shErr != nil {
		// The grace is over: the requests still running are cut.
		cut()
		reqCancel()
		_ = srv.Close()
	}
	shCancel()
	reqCancel()
	cancel()
	wg.Wait()
	return result
}

// waitingNotice is how long a stop may wait for the requests in flight
// before Stack.Waiting says so.
const waitingNotice = 250 * time.Millisecond

// shutdownGrace is how long a stop waits for the requests in flight to
// finish with their own answers before it cuts them (a conformance-delay
// request holds its answer up to 10 s).
const shutdownGrace = 10 * time.Second

// gateway is the stack's HTTP front, each request's deadline timeout: the
// authorizer (its decisions kept for Options.AuthorizerTTL), the api, the
// conformance seams when on, the policy's envelope for refused input.
func (st *stack) gateway(timeout time.Duration) *gateway {
	return &gateway{api: st.api, auth: &authfn.Handler{Keys: st.k.Keys, Logger: st.logger}, authCache: newAuthCache(st.o.AuthorizerTTL), seams: st.sm,
		timeout: timeout, policy: st.k.Guard.Config().Policy, log: st.logger, streams: st.stops}
}

// newUUID returns a random (version 4) UUID, a valid Idempotency-Key.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
