package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/kit"
	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/stream/mapping"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/tables"
)

// ErrConfig is matched (errors.Is) by Start's error when Options are not
// valid; nothing was started then. A bad setting also matches
// settings.ErrConfig.
var ErrConfig = errors.New("devstack: invalid options")

// Stack is a running local stack: started by Start, ended by Stop (or by
// the end of Start's context).
type Stack struct {
	cancel context.CancelFunc
	done   chan struct{}
	// now is closed by StopNow: the stop cuts the requests in flight
	// instead of giving them the shutdown's grace.
	now     chan struct{}
	nowOnce sync.Once
	// waiting is closed once a stop waits for requests in flight.
	waiting     chan struct{}
	waitingOnce sync.Once
	// cut is set when the stop cut requests in flight (StopNow, or the
	// grace ran out with some still running).
	cut atomic.Bool
	err error // dev's result, set before done is closed

	// Set before Start returns.
	url, endpoint string
	keys          []string
	tables        map[string]string
}

// Start starts the whole stack on this machine, as `idemkit dev` does: a
// DynamoDB engine (unless Options.Endpoint is given), the tables of
// template.yaml, the HTTP API on Options.Addr through the authorizer and api
// handler code Lambda runs, and the executor and auditor driven by the
// tables' streams. It returns once the API serves (GET /.well-known/openwop
// answers 200), or the first error; with an ErrConfig error nothing was
// started, and with any error nothing is left running. The stack runs
// until Stop is called or ctx ends.
func Start(ctx context.Context, o Options) (*Stack, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stack{cancel: cancel, done: make(chan struct{}), now: make(chan struct{}), waiting: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		s.err = dev(ctx, o, o.Stdout, o.Logger, s, ready)
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		cancel()
		return nil, s.err
	}
}

// URL is the base URL of the HTTP API ("http://127.0.0.1:3000").
func (s *Stack) URL() string { return s.url }

// Endpoint is the DynamoDB endpoint the stack uses (the engine it started,
// or Options.Endpoint, or the serializing proxy in front of a moto server).
func (s *Stack) Endpoint() string { return s.endpoint }

// APIKeys are the seeded API keys, "KEY=TENANT": Options.APIKeys, or the
// minted demo keys.
func (s *Stack) APIKeys() []string { return slices.Clone(s.keys) }

// Tables maps each table's template.yaml logical ID to its name.
func (s *Stack) Tables() map[string]string { return maps.Clone(s.tables) }

// Done is closed once the stack has stopped: after Stop, after Start's ctx
// ended, or when the HTTP server failed (Stop then reports why).
func (s *Stack) Done() <-chan struct{} { return s.done }

// Stop stops the stack and everything it started (the HTTP server after
// its in-flight requests, up to 10 s; the pollers; the engine) and waits
// until all of it has. It returns the HTTP server's error if serving
// failed, else nil; calling it again returns the same.
func (s *Stack) Stop() error {
	s.cancel()
	<-s.done
	return s.err
}

// StopNow stops the stack as Stop does, without the grace: the requests in
// flight are cut at once (their clients may get no answer), then the
// pollers and the engine are stopped as by Stop, which it waits for. It
// may follow a Stop or the end of Start's context that is still waiting
// for the requests in flight, and cuts that wait short.
func (s *Stack) StopNow() error {
	s.nowOnce.Do(func() { close(s.now) })
	return s.Stop()
}

// Cut reports whether the stop cut requests in flight: StopNow, or the
// grace running out, found some still running and ended them without
// their answers. It is false while the stack runs and after a stop that
// had none to cut; read it once Done is closed (after Stop or StopNow).
func (s *Stack) Cut() bool { return s.cut.Load() }

// Waiting is closed once a stop (Stop, the end of Start's context) is
// waiting for requests in flight: the HTTP server's graceful shutdown has
// not ended within a moment (a quarter of a second). They get up to 10 s;
// StopNow cuts them.
func (s *Stack) Waiting() <-chan struct{} { return s.waiting }

// stack is the local stack wired over one engine's tables, ready to serve
// (serve): the kit, the api handler and the gateway's conformance seams,
// the seeded keys, the executor and auditor behind the stream pollers, and
// the parked-run resumer.
type stack struct {
	o       Options // with the seeded keys (APIKeys) filled in
	stdout  io.Writer
	logger  *slog.Logger
	eng     *devEngine
	k       *kit.Kit
	api     *apifn.Handler
	sm      *seams
	pollers []*poller
	feed    *writeFeed // in place of the runs stream on an engine without streams, else nil
	res     *resumer
	lag     *lagStatus
	// stops ends the held event streams and the api's waiting long polls
	// when the server stops.
	stops *streamCloser
}

// newStack wires the stack over client (whose writes tw reports) and env,
// its API served at baseURL:
// the kit, the api handler, the seeded keys, the conformance seams and the
// fixture destination, and the executor and auditor driven by the stream
// pollers and the resumer. Nothing runs until serve.
func newStack(ctx context.Context, o Options, stdout io.Writer, logger *slog.Logger, baseURL string, client *dynamodb.Client, tw *tableWaker, eng *devEngine, env hostsettings.Env) (*stack, error) {
	endpoint, streams := eng.endpoint, eng.streams
	metrics := emf.New(io.Discard, env.MetricsNamespace)
	k, err := kit.NewKit(kit.Config{Env: env, Client: client, Parts: kit.Parts{Runs: true, Keys: true, Guard: true, Ledger: true}, Logger: logger, Metrics: metrics,
		Test: kit.TestConfig{GuardWait: o.IdempotencyWait}})
	if err != nil {
		return nil, err
	}
	// The api function's Config, and what only dev has: its own base URL,
	// the conformance seams and the replay fixtures' destination.
	booted := time.Now()
	ac := apifn.ConfigFromKit(k)
	ac.BaseURL, ac.ReplayFixtures = baseURL, true
	// A stop ends the held event streams and the waiting long polls at
	// once (serve registers stops.close with the server's shutdown).
	stops := newStreamCloser()
	ac.Test = apifn.TestConfig{ConformanceSeams: o.ConformanceSeams, BaseURLOf: loopbackOrigin(baseURL), PollWaitEnds: stops.closed()}
	var idemHolds *holds
	if o.ConformanceSeams {
		// The idempotency hold seam keeps a same-key create in flight
		// under its claim for as long as a test needs.
		idemHolds = &holds{armed: map[string]*hold{}, taking: map[string]*hold{}}
		ac.Test.Hold = idemHolds.wait
	}
	api, err := apifn.New(ac)
	if err != nil {
		return nil, err
	}
	if len(o.APIKeys) == 0 {
		for _, t := range []string{"demo-a", "demo-b"} {
			key := apikeys.NewAPIKey()
			o.APIKeys = append(o.APIKeys, key+"="+t)
			fmt.Fprintf(stdout, "demo API key for tenant %s: %s\n", t, key)
		}
	}
	// Every seeded key, minted or given with --api-key, carries the demo
	// credential attributes, so it works under every --policy.
	for _, kv := range o.APIKeys {
		if err := seedDevKey(ctx, k.Keys, kv); err != nil {
			return nil, err
		}
	}

	var sm *seams
	if o.ConformanceSeams {
		// The webhook client's transport forces the effect-retry seam's
		// transport retry; every other delivery passes through unchanged.
		k.Webhook.Client = env.Webhook.HTTPClient(10 * time.Second)
		f := &forcedRetry{base: k.Webhook.Client.Transport, armed: map[string]bool{}}
		k.Webhook.Client.Transport = f
		sm = &seams{runs: k.Runs, policy: env.Webhook, force: f, holds: idemHolds}
	}
	// The graph fixtures' side-effecting nodes post to dev's own loopback
	// fixture destination when their run names no inputs.url.
	fixture, err := startFixtureReceiver(ctx)
	if err != nil {
		return nil, err
	}
	if sm != nil {
		sm.fixtureURL = fixture.url
	}
	fixtureHook := fixtureWebhook(k)

	sc := emulator.StreamsClient(endpoint)
	// The executor counts each failed execution on its run and fails the
	// run at the STREAM_MAX_RETRIES+1-th (dev's own default: the setting's
	// Dev); the pollers retry for STREAM_RETRY_SECONDS whatever the count,
	// so an outage of the store (no failure can be counted) loses nothing.
	// The executor's start lag goes to the EMF recorder and to the status
	// line dev prints every devStatusEvery while runs are started.
	lag := &lagStatus{next: metrics}
	exec := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: logger, MaxAttempts: env.StreamMaxRetries + 1, StaleAfter: env.RunStale, Metrics: lag,
		Fixture: fixtureHook, FixtureURL: fixture.url, NoopEffect: o.ConformanceSeams}
	aud := &auditfn.Auditor{Metrics: emf.New(io.Discard, "idemkit"), Logger: logger}
	runsPoller, err := newRunsPoller(env.RunsTable, exec.HandleRecords)
	if err != nil {
		return nil, err
	}
	pollers := []*poller{
		runsPoller,
		// The auditor's streams start nothing: they are read at the
		// deployed mappings' polling rate (devAuditGather).
		{name: "effects", table: env.EffectsTable, gather: devAuditGather, handle: func(ctx context.Context, recs []stream.StreamRecord) []string { aud.Audit(ctx, recs); return nil }},
		{name: "idempotency", table: env.Idem.Table, gather: devAuditGather, handle: func(ctx context.Context, recs []stream.StreamRecord) []string { aud.Audit(ctx, recs); return nil }},
	}
	var feed *writeFeed
	if !streams {
		// No DynamoDB Streams (dynalite): the executor is fed the runs the
		// stack itself writes and updates (writeFeed), through the runs
		// poller's filter and delivery; the auditor has nothing to read.
		keys, err := templateKeyAttrs("RunsTable")
		if err != nil {
			return nil, err
		}
		runsPoller.log, runsPoller.retryFor = logger, env.StreamRetry
		feed = newWriteFeed(runsPoller, keys)
		tw.feed(env.RunsTable, feed, consistentGet(client))
		pollers = nil
	}
	var cp checkpoints
	if pollers != nil {
		if cp, err = newDynamoCheckpoints(ctx, client, o.TablePrefix+checkpointTableSuffix); err != nil {
			return nil, err
		}
	}
	for _, p := range pollers {
		arn, err := tables.StreamARN(ctx, client, p.table)
		if err != nil {
			return nil, err
		}
		p.sc, p.arn, p.log, p.interval, p.retryFor, p.cp = sc, arn, logger, 100*time.Millisecond, env.StreamRetry, cp
	}
	// Every write of the stack (the api's, the executor's, the seams')
	// wakes the poller of the table it wrote, and every ResumeDue pass
	// that executed runs wakes them all: an idle stack polls each stream
	// every devIdlePoll, yet a new run starts at once, and a stream no
	// write touched (the effects stream of runs that record no effect) is
	// not polled for nothing.
	wake := newWaker(len(pollers))
	for i, p := range pollers {
		p.wake = wake[i]
		tw.register(p.table, wake[i])
	}

	// Each pass also drives the runs without progress for RUN_STALE_SECONDS
	// (a stream delivery lost or given up), and passes at least every half
	// of that bound: an acknowledged run settles once the store is back.
	res := newResumer(devResumePass(exec), execfn.DefaultResumeBatch)
	res.resumed, exec.Parked = wake.kick, res.parked
	res.idle = min(devIdleResume, max(env.RunStale/2, time.Second))
	if sm != nil {
		// The durability seam holds, releases and kills through the
		// executor's hooks; a run this process finds running, last updated
		// before it started, was interrupted by the previous process and
		// is recorded as restored.
		sm.dur = &durability{runs: k.Runs, policy: env.Webhook, execute: exec.Execute, restart: o.Restart,
			staleAfter: env.RunStale, resumeEvery: res.idle, held: map[string]bool{}, killAt: map[string]bool{}}
		exec.Test.Booted, exec.Test.Held, exec.Test.NodeStarted = booted, sm.dur.Held, sm.dur.NodeStarted
	}

	return &stack{o: o, stdout: stdout, logger: logger, eng: eng, k: k, api: api, sm: sm, pollers: pollers, feed: feed, res: res, lag: lag, stops: stops}, nil
}

// newRunsPoller is the poller of the runs table's stream, which drives the
// executor (handle) as its deployed event source mapping does (BatchSize
// 1, ParallelizationFactor 10): the records the mapping's filter in
// template.yaml passes (a new run's INSERT and a resumed run's MODIFY,
// paused to running; not the table's other items, nor a run's other
// writes or deletion), one record per call, up to
// devStreamParallel at once, in order per run (the table's partition key).
// The stack fills in the stream and the retry settings.
func newRunsPoller(table string, handle batchFunc) (*poller, error) {
	key, err := templateHashKey("RunsTable")
	if err != nil {
		return nil, err
	}
	f, err := mapping.RunsStream()
	if err != nil {
		return nil, fmt.Errorf("devstack: the runs stream's filter: %w", err)
	}
	return &poller{name: "runs", table: table, handle: handle, filter: f.Match,
		parallel: devStreamParallel, keyAttr: key}, nil
}

// demoCredential is a demo key's credential: tenant t with the attributes
// both shipped policies scope keys by (the commerce policy: namespace and
// worker; the ERP policy: clientId, companyId and organizationId), so every
// policy runs against the demo keys.
func demoCredential(t string) apikeys.Credential {
	return apikeys.Credential{Tenant: t, Attrs: map[string]string{
		"namespace": t + "-ns", "worker": "demo-worker",
		erp.CredentialClient: t + "-client", erp.CredentialCompany: t + "-company", erp.CredentialOrganization: t + "-org",
	}}
}

// putDevKey stores a key with its attributes where the key store keeps
// them (every host key store does), else its tenant alone.
// seedDevKey stores the seeded key kv ("KEY=TENANT") with the demo
// credential of its tenant. A key already stored (tables reused through
// --dynamodb-endpoint) is kept if it is TENANT's, and is an error naming
// both tenants (never the key) if it is another tenant's: requests
// presenting it would act as that tenant.
func seedDevKey(ctx context.Context, ks apikeys.KeyStore, kv string) error {
	key, tenant, _ := splitAPIKey(kv)
	err := putDevKey(ctx, ks, key, demoCredential(tenant))
	if !errors.Is(err, apikeys.ErrKeyExists) {
		return err
	}
	had, ok, err := ks.Tenant(ctx, apikeys.HashKey(key))
	if err != nil || !ok || had == tenant {
		return err
	}
	return fmt.Errorf("an --api-key seeded for tenant %s is already in the api-keys table for tenant %s (tables reused from an earlier run): give another key, or revoke it first (idemkit apikey revoke --key - --endpoint URL)", tenant, had)
}

func putDevKey(ctx context.Context, ks apikeys.KeyStore, key string, c apikeys.Credential) error {
	if cs, ok := ks.(apikeys.CredentialStore); ok {
		return cs.PutCredential(ctx, key, c)
	}
	return ks.PutKey(ctx, key, c.Tenant)
}
