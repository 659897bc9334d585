package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
	"github.com/idemkit/idemkit/functions/host/runs"
	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/rawconn"
	"github.com/idemkit/idemkit/internal/tables"
)

// DefaultDevAddr is `idemkit dev --addr`'s default.
const DefaultDevAddr = "127.0.0.1:3000"

// devStreamRetries is how often `idemkit dev`'s stream pollers retry a
// failing batch before dropping it (the event source mapping's
// MaximumRetryAttempts) unless STREAM_MAX_RETRIES says otherwise.
const devStreamRetries = 5

// devDefaults are `idemkit dev`'s own defaults, beneath the environment: a
// short effect lease (a crashed attempt is retried within seconds) and
// devStreamRetries stream retries.
var devDefaults = map[string]string{
	hostsettings.EnvEffectLease:      "30",
	hostsettings.EnvStreamMaxRetries: fmt.Sprint(devStreamRetries),
}

// devSettings reads `idemkit dev`'s settings.Env the one way the functions do
// (settings.LoadEnv): the values dev decides itself (own: the tables it created,
// the endpoint it reaches), over the setting flags, over the environment,
// over devDefaults.
func devSettings(own, flags map[string]string, getenv func(string) string) (hostsettings.Env, error) {
	return hostsettings.LoadEnv(hostsettings.Layered(hostsettings.Values(own), hostsettings.Values(flags), getenv, hostsettings.Values(devDefaults)))
}

// settingFlag is a `idemkit dev` flag that overrides one settings.Settings
// variable (settings.Setting.Flag).
type settingFlag struct {
	s    hostsettings.Setting
	vals map[string]string
}

func (f settingFlag) String() string {
	if f.vals == nil {
		return ""
	}
	return f.vals[f.s.Name]
}
func (f settingFlag) Set(v string) error { f.vals[f.s.Name] = v; return nil }
func (f settingFlag) IsBoolFlag() bool   { return f.s.BoolFlag }

var devUsageLine = `idemkit dev [--addr HOST:PORT] [--emulator dynamodb-local|moto|dynalite]
       [--dynamodb-endpoint URL] [--table-prefix P] [--api-key KEY=TENANT]...
       [--request-timeout D] [--idempotency-wait D] [--authorizer-ttl D]
       [--allow-loopback-webhooks]
       [--policy ` + strings.Join(idem.PolicyNames(), "|") + `] [--conformance-seams]`

const devAbout = `Runs the whole stack on this machine: a DynamoDB engine (--emulator, unless
--dynamodb-endpoint is given), the tables of template.yaml, the HTTP
API on --addr through the same authorizer and api handler code that Lambda
runs, and the executor and auditor driven by polling the tables' streams.
Ready when GET /.well-known/openwop answers 200. SIGINT or SIGTERM stops it
and everything it started.

It reads the configuration variables the functions read (README.md,
"Configuration reference"; IDEMPOTENCY_REQUIRED, IDEMPOTENCY_POLICY,
WEBHOOK_ALLOW_PRIVATE, ...); --policy and --allow-loopback-webhooks override
theirs, and the tables and endpoint are always the ones dev uses.
DYNAMODB_ENDPOINT, when set, stands for --dynamodb-endpoint. Dev's own
defaults: EFFECT_LEASE_SECONDS=30, STREAM_MAX_RETRIES=5.

Like the deployed HTTP API (template.yaml ReauthorizeEvery), the gateway
keeps each authorizer decision, grant or refusal, per Authorization value
for --authorizer-ttl: a key changed or removed in the api-keys table while
dev runs keeps its old decision that long. --authorizer-ttl 0 asks the
authorizer (one api-keys read) on every request.

examples:
  idemkit dev
  idemkit dev --emulator moto --addr 127.0.0.1:3001
  idemkit dev --dynamodb-endpoint http://127.0.0.1:8000 --api-key k-acme-0123456789=acme
`

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

type apiKeyFlag []string

func (a *apiKeyFlag) String() string { return strings.Join(*a, ",") }
func (a *apiKeyFlag) Set(v string) error {
	key, tenant, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(key) == "" || !runs.ValidTenant(tenant) {
		return errors.New("want KEY=TENANT (tenant: ^(anon:)?[A-Za-z0-9._~-]{1,128}$)")
	}
	*a = append(*a, v)
	return nil
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	setUsage(fs, devUsageLine, devAbout)
	addr := fs.String("addr", DefaultDevAddr, "address the HTTP API listens on")
	engine := fs.String("emulator", "", "DynamoDB engine to start: dynamodb-local (AWS's DynamoDB Local; needs java), moto or dynalite (no streams: runs are stored, not executed) (default dynamodb-local when java is on PATH, else moto)")
	endpoint := fs.String("dynamodb-endpoint", "", "use this DynamoDB endpoint instead of starting an emulator (tables are created if missing; a moto server is detected and reached one request at a time)")
	prefix := fs.String("table-prefix", DefaultTablePrefix, "table name prefix")
	reqTimeout := fs.Duration("request-timeout", DefaultRequestTimeout, "deadline of each API request, store calls included; a store that does not answer within it gets the client a 503 with Retry-After")
	settings := map[string]string{}
	for _, s := range hostsettings.Settings {
		if s.Flag != "" {
			fs.Var(settingFlag{s: s, vals: settings}, s.Flag, s.FlagUsage)
		}
	}
	seams := fs.Bool("conformance-seams", false, "serve and advertise the OpenWOP conformance seams profile (openwop-conformance-seams-v2: POST /conformance/seams/sample/test/idempotency/effect-retry); for running the conformance suite, never in production")
	idemWait := fs.Duration("idempotency-wait", 0, "how long a duplicate of an in-flight request waits for its outcome before 409 idempotency_in_flight (default 0: the idem default, 5s)")
	reauth, err := deployedReauthorizeEvery()
	if err != nil {
		fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
		return 1
	}
	authTTL := fs.Duration("authorizer-ttl", reauth, "how long the gateway keeps an authorizer decision (grant or refusal) per Authorization value, as API Gateway does (the default is template.yaml's ReauthorizeEvery); 0 asks the authorizer on every request")
	var keys apiKeyFlag
	fs.Var(&keys, "api-key", "seed an API key, KEY=TENANT (repeatable; it carries the credential attributes every policy scopes by, derived from TENANT); default: mint two demo keys and print them")
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintln(stderr, "idemkit dev: unexpected arguments:", pos)
		return 2
	}
	if *endpoint == "" && *engine == "" {
		*endpoint = strings.TrimSpace(os.Getenv(hostsettings.EnvDynamoDBEndpoint))
	}
	if *engine != "" && *endpoint != "" {
		fmt.Fprintln(stderr, "idemkit dev: --emulator and --dynamodb-endpoint exclude each other")
		return 2
	}
	if *engine != "" && !slices.Contains(emulator.Kinds, *engine) {
		fmt.Fprintf(stderr, "idemkit dev: --emulator %q: want one of %s\n", *engine, strings.Join(emulator.Kinds, ", "))
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	if *idemWait < 0 {
		fmt.Fprintln(stderr, "idemkit dev: --idempotency-wait must not be negative")
		return 2
	}
	if *authTTL < 0 {
		fmt.Fprintln(stderr, "idemkit dev: --authorizer-ttl must not be negative")
		return 2
	}
	if *reqTimeout <= 0 {
		fmt.Fprintln(stderr, "idemkit dev: --request-timeout must be positive")
		return 2
	}
	// A bad setting stops start-up before anything is started (the tables
	// stand in for the ones dev creates).
	placeholders := map[string]string{}
	for _, id := range []string{"IdempotencyTable", "RunsTable", "EffectsTable", "ApiKeysTable", "FenceTable"} {
		placeholders[id] = *prefix + id
	}
	own := devOwn(placeholders, "http://127.0.0.1")
	if _, err := devSettings(own, settings, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
		for _, s := range hostsettings.Settings {
			if _, set := settings[s.Name]; set {
				fmt.Fprintf(stderr, "idemkit dev: --%s sets %s\n", s.Flag, s.Name)
			}
		}
		return 2
	}
	o := devOptions{addr: *addr, engine: *engine, endpoint: *endpoint, prefix: *prefix, settings: settings, getenv: os.Getenv, keys: keys, seams: *seams, idemWait: *idemWait, timeout: *reqTimeout, authTTL: *authTTL}
	if err := dev(ctx, o, stdout, logger); err != nil {
		fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
		return 1
	}
	return 0
}

type devOptions struct {
	addr, engine, endpoint, prefix string
	// settings are the setting flags' values by variable name (--policy:
	// IDEMPOTENCY_POLICY, --allow-loopback-webhooks: WEBHOOK_ALLOW_LOOPBACK).
	settings map[string]string
	// getenv reads the environment (os.Getenv); nil reads none.
	getenv func(string) string
	keys   []string
	// seams serves and advertises the conformance seams profile.
	seams bool
	// idemWait is Layer 1's duplicate wait budget (0: idem's default).
	idemWait time.Duration
	// timeout is each request's deadline (0: DefaultRequestTimeout).
	timeout time.Duration
	// authTTL is how long the gateway keeps an authorizer decision (0:
	// none kept).
	authTTL time.Duration
}

func dev(ctx context.Context, o devOptions, stdout io.Writer, logger *slog.Logger) error {
	start := time.Now()
	ln, err := net.Listen("tcp", o.addr) // fail fast on a taken port
	if err != nil {
		return err
	}
	defer ln.Close()

	endpoint, engine := o.endpoint, o.engine
	if endpoint == "" {
		if engine == "" {
			engine = emulator.DefaultDevKind()
		}
		m, err := emulator.StartDev(ctx, engine, emulator.Options{ToolsDir: devToolsDir(), SharedDB: true})
		if err != nil {
			return err
		}
		defer m.Stop()
		endpoint = m.Endpoint
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
			logger.Info("dev: --dynamodb-endpoint is a moto server; reaching it one request at a time", slog.String("endpoint", o.endpoint))
		}
	}
	client := emulator.Client(endpoint, watchStore)
	names, err := createTables(ctx, client, o.prefix)
	if err != nil {
		return err
	}

	env, err := devSettings(devOwn(names, endpoint), o.settings, o.getenv)
	if err != nil {
		return err
	}
	// An engine without transactions (dynalite) makes createRun use a
	// conditional PutItem whatever RUNS_TRANSACTIONAL says.
	env.Transactional = env.Transactional && supportsTransactions(ctx, client, env.RunsTable)
	metrics := emf.New(io.Discard, env.MetricsNamespace)
	k, err := kit.NewKit(env, client, kit.Parts{Runs: true, Keys: true, Guard: true, Ledger: true, Test: kit.TestParts{GuardWait: o.idemWait}}, logger, metrics)
	if err != nil {
		return err
	}
	api, err := apifn.New(apifn.Config{Runs: k.Runs, Guard: k.Guard, Ledger: k.Ledger, Webhook: env.Webhook,
		CrossRegion: env.CrossRegion, ReplicationLagBoundMs: env.ReplicationLagBoundMs, BaseURL: "http://" + ln.Addr().String(), Logger: logger, Test: apifn.TestConfig{ConformanceSeams: o.seams}})
	if err != nil {
		return err
	}
	if len(o.keys) == 0 {
		for _, t := range []string{"demo-a", "demo-b"} {
			key := apikeys.NewAPIKey()
			o.keys = append(o.keys, key+"="+t)
			fmt.Fprintf(stdout, "demo API key for tenant %s: %s\n", t, key)
		}
	}
	// Every seeded key, minted or given with --api-key, carries the demo
	// credential attributes, so it works under every --policy.
	for _, kv := range o.keys {
		key, tenant, _ := strings.Cut(kv, "=")
		if err := putDevKey(ctx, k.Keys, key, demoCredential(tenant)); err != nil && !errors.Is(err, apikeys.ErrKeyExists) {
			return err
		}
	}

	var sm *seams
	if o.seams {
		// The webhook client's transport forces the effect-retry seam's
		// transport retry; every other delivery passes through unchanged.
		k.Webhook.Client = env.Webhook.HTTPClient(10 * time.Second)
		f := &forcedRetry{base: k.Webhook.Client.Transport, armed: map[string]bool{}}
		k.Webhook.Client.Transport = f
		sm = &seams{runs: k.Runs, policy: env.Webhook, force: f}
	}

	sc := emulator.StreamsClient(endpoint)
	// The pollers retry a failing batch STREAM_MAX_RETRIES times (dev's
	// default devStreamRetries), like the event source mapping's
	// MaximumRetryAttempts: the executor's last try ends the run failed
	// instead of stranding it "running".
	exec := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: logger, MaxAttempts: env.StreamMaxRetries + 1}
	aud := &auditfn.Auditor{Metrics: emf.New(io.Discard, "idemkit"), Logger: logger}
	pollers := []*poller{
		{name: "runs", handle: exec.HandleRecords, filter: func(r stream.StreamRecord) bool { return r.EventName == "INSERT" }},
		{name: "effects", handle: func(ctx context.Context, recs []stream.StreamRecord) []string { aud.Audit(ctx, recs); return nil }},
		{name: "idempotency", handle: func(ctx context.Context, recs []stream.StreamRecord) []string { aud.Audit(ctx, recs); return nil }},
	}
	if engine == emulator.Dynalite {
		// dynalite has no DynamoDB Streams: nothing can drive the
		// executor and auditor.
		pollers = nil
	}
	var cp checkpoints
	if pollers != nil {
		if cp, err = newDynamoCheckpoints(ctx, client, o.prefix+checkpointTableSuffix); err != nil {
			return err
		}
	}
	for i, p := range pollers {
		table := []string{env.RunsTable, env.EffectsTable, env.Idem.Table}[i]
		arn, err := streamARN(ctx, client, table)
		if err != nil {
			return err
		}
		p.sc, p.arn, p.log, p.interval, p.maxRetries, p.cp = sc, arn, logger, 100*time.Millisecond, env.StreamMaxRetries, cp
	}
	// Every request that may write, every batch a poller handled and every
	// ResumeDue pass that executed runs wakes the idle pollers: an idle
	// stack polls each stream every devIdlePoll, yet a new run starts at
	// once.
	wake := newWaker(len(pollers))
	for i, p := range pollers {
		p.wake, p.kick = wake[i], wake.kick
	}

	res := newResumer(exec.ResumeDue, execfn.DefaultResumeBatch)
	res.resumed, exec.Parked = wake.kick, res.parked

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
	if o.timeout <= 0 {
		o.timeout = DefaultRequestTimeout
	}
	srv := &http.Server{Handler: &gateway{api: api, auth: &authfn.Handler{Keys: k.Keys, Logger: logger}, authCache: newAuthCache(o.authTTL), seams: sm, timeout: o.timeout, wrote: wake.kick},
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: o.timeout + 30*time.Second,
		IdleTimeout: 2 * time.Minute, BaseContext: func(net.Listener) context.Context { return runCtx }, ConnContext: rawconn.ConnContext}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(rawconn.Listener{Listener: envelopeListener{ln}}) }()
	if pollers == nil {
		fmt.Fprintln(stdout, "idemkit dev: dynalite has no DynamoDB Streams: runs are stored but never executed (use --emulator dynamodb-local or moto for the executor and auditor)")
	}
	fmt.Fprintf(stdout, "idemkit dev: serving http://%s (%s at %s, ready in %s); Ctrl-C stops\n", ln.Addr(), engineName(engine), endpoint, time.Since(start).Round(time.Millisecond))
	if k0, _, ok := strings.Cut(o.keys[0], "="); ok {
		fmt.Fprintf(stdout, "try (twice: the second answer is a replay): curl -si -X POST http://%s/runs -H 'Authorization: Bearer %s' -H 'Idempotency-Key: %s' -H 'Content-Type: application/json' -d '{\"workflowId\":\"conformance-noop\"}'\n", ln.Addr(), k0, newUUID())
	}

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

// devOwn are the settings `idemkit dev` decides itself, over any
// environment: the tables it created (names by template.yaml logical ID)
// and the endpoint it reaches.
func devOwn(names map[string]string, endpoint string) map[string]string {
	return map[string]string{
		idem.EnvTable:                    names["IdempotencyTable"],
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

// engineName is how the ready line names the DynamoDB engine.
func engineName(kind string) string {
	switch kind {
	case emulator.DynamoDBLocal:
		return "DynamoDB Local"
	case emulator.Moto, emulator.Dynalite:
		return kind
	}
	return "DynamoDB"
}

// devToolsDir is the directory whose package-lock.json pins the npm-installed
// engines: $IDEMKIT_TOOLS, else tools/ of the first directory upwards from
// the working directory that has tools/package.json, else tools/ of the
// source tree this binary was built from.
func devToolsDir() string {
	if d := os.Getenv("IDEMKIT_TOOLS"); d != "" {
		return d
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "tools", "package.json")); err == nil {
				return filepath.Join(d, "tools")
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "tools")
}

// newUUID returns a random (version 4) UUID, a valid Idempotency-Key.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
