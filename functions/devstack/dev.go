package devstack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/idemenv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/kit"
	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/rawconn"
	"github.com/idemkit/idemkit/internal/tables"
)

// devDefaults are `idemkit dev`'s own defaults, beneath the environment,
// stated in the settings table (settings.Setting.Dev): a short effect lease
// (a crashed attempt is retried within seconds) and fewer stream retries.
var devDefaults = hostsettings.DevDefaults()

// devSettings reads `idemkit dev`'s settings.Env the one way the functions do
// (settings.LoadEnv): the values dev decides itself (own: the tables it created,
// the endpoint it reaches), over the setting flags, over the environment,
// over devDefaults.
func devSettings(own, flags map[string]string, getenv func(string) string) (hostsettings.Env, error) {
	return hostsettings.LoadEnv(hostsettings.Layered(hostsettings.Values(own), hostsettings.Values(flags), getenv, hostsettings.Values(devDefaults)))
}

// demoCredential is a demo key's credential: tenant t with the attributes
// both shipped policies scope keys by (the commerce policy: namespace and
// worker; the ERP policy: clientId, companyId and organizationId), so every
// policy runs against the demo keys.
func demoCredential(t string) apikeys.Credential {
	return apikeys.Credential{Tenant: t, Attrs: map[string]string{
		"namespace": t + "-ns", "worker": "demo-worker",
		idem.CredentialClient: t + "-client", idem.CredentialCompany: t + "-company", idem.CredentialOrganization: t + "-org",
	}}
}

// putDevKey stores a key with its attributes where the key store keeps
// them (every host key store does), else its tenant alone.
func putDevKey(ctx context.Context, ks apikeys.KeyStore, key string, c apikeys.Credential) error {
	if cs, ok := ks.(apikeys.CredentialStore); ok {
		return cs.PutCredential(ctx, key, c)
	}
	return ks.PutKey(ctx, key, c.Tenant)
}

// dev runs the stack of s until ctx ends: once it serves, it records what
// s reports and closes ready.
func dev(ctx context.Context, o Options, stdout io.Writer, logger *slog.Logger, s *Stack, ready chan<- struct{}) error {
	start := time.Now()
	stdout = &syncWriter{w: stdout}
	ln, err := net.Listen("tcp", o.Addr) // fail fast on a taken port
	if err != nil {
		return err
	}
	defer ln.Close()

	endpoint, engine := o.Endpoint, o.Engine
	// streams: the engine has DynamoDB Streams (the engine table's
	// capability; an external endpoint is assumed to).
	streams := true
	if endpoint == "" {
		if engine == "" {
			engine = emulator.DefaultDevKind()
		}
		m, err := emulator.StartDev(ctx, engine, emulator.Options{ToolsDir: devToolsDir(o.Getenv), Progress: o.Progress, SharedDB: true})
		if err != nil {
			return err
		}
		defer m.Stop()
		endpoint, streams = m.Endpoint, m.Engine.Caps.Streams
		logger.Info("dev: started the DynamoDB engine", slog.String("engine", engine), slog.String("endpoint", endpoint), slog.Int("pid", m.PID()))
	} else {
		engine = "external"
		if emulator.IsMoto(ctx, endpoint) {
			// moto checks a condition and applies the write in separate
			// steps: reached directly, concurrent lease renewals and
			// outcome writes interleave. Serialize this process's calls.
			ser, err := emulator.Serialize(endpoint)
			if err != nil {
				return err
			}
			defer ser.Close()
			engine, endpoint = emulator.Moto, ser.Endpoint
			logger.Info("dev: --dynamodb-endpoint is a moto server; reaching it one request at a time", slog.String("endpoint", o.Endpoint))
		}
	}
	client := emulator.Client(endpoint, watchStore)
	names, err := tables.Ensure(ctx, client, o.TablePrefix, nil)
	if err != nil {
		return err
	}

	env, err := devSettings(devOwn(names, endpoint), o.Settings, o.Getenv)
	if err != nil {
		return err
	}
	// An engine without transactions (dynalite) makes createRun use a
	// conditional PutItem whatever RUNS_TRANSACTIONAL says.
	env.Transactional = env.Transactional && supportsTransactions(ctx, client, env.RunsTable)
	metrics := emf.New(io.Discard, env.MetricsNamespace)
	k, err := kit.NewKit(env, client, kit.Parts{Runs: true, Keys: true, Guard: true, Ledger: true, Test: kit.TestParts{GuardWait: o.IdempotencyWait}}, logger, metrics)
	if err != nil {
		return err
	}
	apiTest := apifn.TestConfig{ConformanceSeams: o.ConformanceSeams}
	var idemHolds *holds
	if o.ConformanceSeams {
		idemHolds = &holds{armed: map[string]*hold{}, taking: map[string]*hold{}}
		apiTest.Hold = idemHolds.wait
	}
	api, err := apifn.New(apifn.Config{Runs: k.Runs, Guard: k.Guard, Ledger: k.Ledger, Webhook: env.Webhook,
		CrossRegion: env.CrossRegion, ReplicationLagBoundMs: env.ReplicationLagBoundMs, BaseURL: "http://" + ln.Addr().String(), Logger: logger, Test: apiTest,
		ReplayFixtures: true})
	if err != nil {
		return err
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
		key, tenant, _ := strings.Cut(kv, "=")
		if err := putDevKey(ctx, k.Keys, key, demoCredential(tenant)); err != nil && !errors.Is(err, apikeys.ErrKeyExists) {
			return err
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
		return err
	}
	if sm != nil {
		sm.fixtureURL = fixture.url
	}
	fixtureHook := &webhook.Webhook{Ledger: k.Ledger, Policy: webhook.WebhookPolicy{AllowLoopback: true}}

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
	pollers := []*poller{
		{name: "runs", table: env.RunsTable, handle: exec.HandleRecords, filter: func(r stream.StreamRecord) bool { return r.EventName == "INSERT" }},
		{name: "effects", table: env.EffectsTable, handle: func(ctx context.Context, recs []stream.StreamRecord) []string { aud.Audit(ctx, recs); return nil }},
		{name: "idempotency", table: env.Idem.Table, handle: func(ctx context.Context, recs []stream.StreamRecord) []string { aud.Audit(ctx, recs); return nil }},
	}
	if !streams {
		// No DynamoDB Streams (dynalite): nothing can drive the executor
		// and auditor.
		pollers = nil
	}
	var cp checkpoints
	if pollers != nil {
		if cp, err = newDynamoCheckpoints(ctx, client, o.TablePrefix+checkpointTableSuffix); err != nil {
			return err
		}
	}
	for _, p := range pollers {
		arn, err := tables.StreamARN(ctx, client, p.table)
		if err != nil {
			return err
		}
		p.sc, p.arn, p.log, p.interval, p.retryFor, p.cp = sc, arn, logger, 100*time.Millisecond, env.StreamRetry, cp
	}
	// Every request that may write, every batch a poller handled and every
	// ResumeDue pass that executed runs wakes the idle pollers: an idle
	// stack polls each stream every devIdlePoll, yet a new run starts at
	// once.
	wake := newWaker(len(pollers))
	for i, p := range pollers {
		p.wake, p.kick = wake[i], wake.kick
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
		exec.Test = execfn.TestHooks{Booted: start, Held: sm.dur.Held, NodeStarted: sm.dur.NodeStarted}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pollers {
		wg.Add(1)
		go func() { defer wg.Done(); p.run(runCtx) }()
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
	srv := &http.Server{Handler: &gateway{api: api, auth: &authfn.Handler{Keys: k.Keys, Logger: logger}, authCache: newAuthCache(o.AuthorizerTTL), seams: sm, timeout: o.RequestTimeout, wrote: wake.kick, policy: k.Guard.Config().Policy},
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: o.RequestTimeout + 30*time.Second,
		IdleTimeout: 2 * time.Minute, BaseContext: func(net.Listener) context.Context { return runCtx }}
	// Each request gets its own header block as received (devraw.go).
	rawconn.Configure(srv)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(rawconn.Listener{Listener: envelopeListener{ln}}) }()
	if pollers == nil {
		fmt.Fprintf(stdout, "idemkit dev: %s has no DynamoDB Streams: runs are stored but never executed (use --emulator %s for the executor and auditor)\n", engineName(engine), streamEngines())
	}
	fmt.Fprintf(stdout, "idemkit dev: serving http://%s (%s at %s, ready in %s); Ctrl-C stops\n", ln.Addr(), engineName(engine), endpoint, time.Since(start).Round(time.Millisecond))
	if k0, _, ok := strings.Cut(o.APIKeys[0], "="); ok {
		fmt.Fprintf(stdout, "try (twice: the second answer is a replay): curl -si -X POST http://%s/runs -H 'Authorization: Bearer %s' -H 'Idempotency-Key: %s' -H 'Content-Type: application/json' -d '{\"workflowId\":\"conformance-noop\"}'\n", ln.Addr(), k0, newUUID())
	}

	s.url, s.endpoint, s.keys, s.tables = "http://"+ln.Addr().String(), endpoint, o.APIKeys, names
	close(ready)

	var result error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		result = err
	}
	logger.Info("dev: shutting down")
	shCtx, shCancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = srv.Shutdown(shCtx)
	shCancel()
	cancel()
	wg.Wait()
	return result
}

// StartEngine starts the DynamoDB engine o names (Options.Engine, default
// as Start chooses) on its own, for a process that runs one stack after
// another on it: the restart supervisor of `idemkit dev
// --conformance-seams`, whose stacks reach it as Options.Endpoint. It
// returns the engine's endpoint and the function that stops it.
func StartEngine(ctx context.Context, o Options) (endpoint string, stop func(), err error) {
	engine := o.Engine
	if engine == "" {
		engine = emulator.DefaultDevKind()
	}
	m, err := emulator.StartDev(ctx, engine, emulator.Options{ToolsDir: devToolsDir(o.Getenv), Progress: o.Progress, SharedDB: true})
	if err != nil {
		return "", nil, err
	}
	return m.Endpoint, m.Stop, nil
}

// checkSettings reports a bad setting before anything is started (the
// tables stand in for the ones dev creates).
func checkSettings(prefix string, settings map[string]string, getenv func(string) string) error {
	placeholders := map[string]string{}
	for _, id := range []string{"IdempotencyTable", "RunsTable", "EffectsTable", "ApiKeysTable", "FenceTable"} {
		placeholders[id] = prefix + id
	}
	own := devOwn(placeholders, "http://127.0.0.1")
	_, err := devSettings(own, settings, getenv)
	return err
}

// devOwn are the settings `idemkit dev` decides itself, over any
// environment: the tables it created (names by template.yaml logical ID)
// and the endpoint it reaches.
func devOwn(names map[string]string, endpoint string) map[string]string {
	return map[string]string{
		idemenv.Table:                    names["IdempotencyTable"],
		hostsettings.EnvRunsTable:        names["RunsTable"],
		hostsettings.EnvEffectsTable:     names["EffectsTable"],
		hostsettings.EnvAPIKeysTable:     names["ApiKeysTable"],
		hostsettings.EnvFenceTable:       names["FenceTable"],
		hostsettings.EnvDynamoDBEndpoint: endpoint,
	}
}

// supportsTransactions probes TransactWriteItems with one condition check on
// a key that never exists; an endpoint without transactions (dynalite) makes
// createRun fall back to a conditional PutItem.
func supportsTransactions(ctx context.Context, c *dynamodb.Client, table string) bool {
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("pk"))).Build()
	if err != nil {
		return false
	}
	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{
		ConditionCheck: &types.ConditionCheck{
			TableName:                aws.String(table),
			Key:                      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "probe#transactions"}},
			ConditionExpression:      cond.Condition(),
			ExpressionAttributeNames: cond.Names(),
		},
	}}})
	return err == nil || !tables.IsUnsupported(err)
}

// engineName is how the ready line names the DynamoDB engine: its Label in
// the engine table, "DynamoDB" for an external endpoint.
func engineName(kind string) string {
	if e, err := emulator.Lookup(kind); err == nil {
		return e.Label
	}
	return "DynamoDB"
}

// streamEngines names the engines of the engine table that have DynamoDB
// Streams ("dynamodb-local or moto").
func streamEngines() string {
	var names []string
	for _, e := range emulator.Engines() {
		if e.Caps.Streams {
			names = append(names, e.Name)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// devToolsDir is the directory holding the npm-installed engines dev
// starts: $IDEMKIT_TOOLS when set; else a checkout's tools/ with the
// engines installed and the same pins as this binary (`make tools`): that
// of the source tree the binary was built from, else the first found
// upwards from the working directory; else "", which makes
// internal/emulator install the pins embedded in the binary into the
// user's cache directory on first use (a binary built with `go install`,
// or copied elsewhere, run from any directory).
func devToolsDir(getenv func(string) string) string {
	if getenv != nil && getenv("IDEMKIT_TOOLS") != "" {
		return getenv("IDEMKIT_TOOLS")
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if d := filepath.Join(filepath.Dir(file), "..", "..", "tools"); emulator.Installed(d) {
			return d
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if t := filepath.Join(d, "tools"); emulator.Installed(t) {
				return t
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return ""
}

// newUUID returns a random (version 4) UUID, a valid Idempotency-Key.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
