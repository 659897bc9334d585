package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/kit"
	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/emulator"
)

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

// devUsageLine is dev's usage; the engine names come from the engine table
// (internal/emulator).
var devUsageLine = `idemkit dev [--addr HOST:PORT] [--emulator ` + emulator.KindList("|", "|") + `]
       [--dynamodb-endpoint URL] [--table-prefix P] [--api-key KEY=TENANT]...
       [--request-timeout D] [--idempotency-wait D] [--authorizer-ttl D]
       [--allow-loopback-webhooks]
       [--policy ` + strings.Join(idem.PolicyNames(), "|") + `] [--conformance-seams]`

const devAbout = `Runs the whole stack on this machine: a DynamoDB engine (--emulator, unless
--dynamodb-endpoint is given), the tables of template.yaml, the HTTP
API on --addr through the same authorizer and api handler code that Lambda
runs, and the executor and auditor driven by polling the tables' streams.
Ready when GET /.well-known/openwop answers 200. SIGINT or SIGTERM stops it
and everything it started, also while it starts (exit 0); the requests in
flight get up to 10 s to finish with their own answers, and a second SIGINT
or SIGTERM stops it at once, those requests cut (exit 0). SIGHUP (its terminal
closed) counts as SIGTERM, unless it was ignored when dev started (nohup).

It reads the configuration variables the functions read
(docs/CONFIGURATION.md; IDEMPOTENCY_REQUIRED, IDEMPOTENCY_POLICY,
WEBHOOK_ALLOW_PRIVATE, ...); --policy, --allow-loopback-webhooks and
--idempotency-wait (IDEMPOTENCY_WAIT_MS) override theirs, and the tables and
endpoint are always the ones dev uses.
DYNAMODB_ENDPOINT, when set and --emulator is not given, stands for
--dynamodb-endpoint (with --emulator dev starts its engine and says the
variable is not used). Dev's own
defaults: EFFECT_LEASE_SECONDS=30, STREAM_MAX_RETRIES=5, RUN_STALE_SECONDS=60,
FENCE_TABLE_REGION=us-east-1 (its engine's region, the home of CROSS_REGION=fenced-effects).
The stream pollers retry a failing record with backoff for
STREAM_RETRY_SECONDS (default 900) before dropping it, and never move their
checkpoint past a record still being retried; a pending or running run
without progress for RUN_STALE_SECONDS is claimed and driven to its end, so
every acknowledged run settles once the store is back.

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

type apiKeyFlag []string

func (a *apiKeyFlag) String() string { return strings.Join(*a, ",") }
func (a *apiKeyFlag) Set(v string) error {
	if err := devstack.CheckAPIKeys(append(slices.Clone(*a), v)); err != nil {
		return err
	}
	*a = append(*a, v)
	return nil
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	setUsage(fs, devUsageLine, devAbout)
	addr := fs.String("addr", devstack.DefaultAddr, "address the HTTP API listens on (every interface, :3000 or 0.0.0.0:3000: its links name localhost)")
	engine := fs.String("emulator", "", "DynamoDB engine to start: "+emulator.FlagHelp()+" (default dynamodb-local when java is on PATH, else moto)")
	endpoint := endpointFlag(fs, "dynamodb-endpoint", "use this DynamoDB endpoint `URL` instead of starting an emulator (tables are created if missing; a moto server is detected and reached one request at a time)")
	prefix := fs.String("table-prefix", DefaultTablePrefix, "table name prefix: each table is named PREFIX + its logical ID")
	reqTimeout := fs.Duration("request-timeout", devstack.DefaultRequestTimeout, "deadline of each API request, store calls included; a store that does not answer within it gets the client a 503 idemkit.store_unavailable, work of the host that outlives it a 503 runner_unavailable, both with Retry-After")
	settings := map[string]string{}
	for _, s := range hostsettings.Settings {
		if s.Flag != "" {
			fs.Var(settingFlag{s: s, vals: settings}, s.Flag, s.Usage())
		}
	}
	seams := fs.Bool("conformance-seams", false, "serve and advertise the OpenWOP conformance seams profile (openwop-conformance-seams-v2: POST /conformance/seams/sample/test/idempotency/effect-retry), the seams-only fixtures (conformance-multi-node, conformance-cancellable, conformance-failure) and the durability seam (/host/durability/kill, /host/durability/bound; dev then runs as its own restart supervisor, the stack in a child process it starts again when the seam kills it); for running the conformance suite, never in production")
	idemWait := fs.Duration("idempotency-wait", 0, "how long a duplicate of an in-flight request waits for its outcome before 409 idempotency_in_flight (under the commerce policy: the pending action, 202 with Retry-After), in whole milliseconds up to 1m; 0 answers at once; overrides "+idemenv.WaitMS+" (default: "+idemenv.WaitMS+", else 5s)")
	reauth, err := devstack.DeployedReauthorizeEvery()
	if err != nil {
		fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
		return 1
	}
	authTTL := fs.Duration("authorizer-ttl", reauth, "how long the gateway keeps an authorizer decision (grant or refusal) per Authorization value, as API Gateway does (the default is template.yaml's ReauthorizeEvery); 0 asks the authorizer on every request")
	var keys apiKeyFlag
	fs.Var(&keys, "api-key", "add an API key, KEY=TENANT (repeatable; KEY as the authorizer accepts it in Authorization: Bearer KEY, "+apikeys.KeyRule+", '=' included: the value is cut at its last '='; it carries the credential attributes every policy scopes by, derived from TENANT); default: mint two demo keys and print them")
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return unexpectedSecretArg(fs, stderr, pos[0])
	}
	// unreachable is the hint when the engine does not answer.
	unreachable := "is it running, and is --dynamodb-endpoint right?"
	if *endpoint == "" && *engine == "" {
		*endpoint = strings.TrimSpace(os.Getenv(hostsettings.EnvDynamoDBEndpoint))
		if *endpoint != "" {
			unreachable = "is it running, and is " + hostsettings.EnvDynamoDBEndpoint + " right?"
		}
		if err := checkEndpoint(*endpoint); err != nil {
			return usageError(fs, stderr, "%s %q (stands for --dynamodb-endpoint): %v", hostsettings.EnvDynamoDBEndpoint, shownURL(*endpoint), err)
		}
	}
	if *endpoint == "" {
		unreachable = "the engine idemkit dev started may have stopped"
	}
	if *engine != "" && *endpoint != "" {
		return usageError(fs, stderr, "--emulator and --dynamodb-endpoint exclude each other")
	}
	if _, err := emulator.Lookup(*engine); *engine != "" && err != nil {
		return usageError(fs, stderr, "--emulator: %v", err)
	}
	if flagGiven(fs, "idempotency-wait") {
		// The flag stands for IDEMPOTENCY_WAIT_MS, over the environment's
		// value, as --policy does for IDEMPOTENCY_POLICY; 0 is the
		// variable's 0 (answer at once). The variable's range is checked
		// with the other settings.
		switch {
		case *idemWait < 0:
			return usageError(fs, stderr, "--idempotency-wait must not be negative")
		case *idemWait%time.Millisecond != 0:
			return usageError(fs, stderr, "--idempotency-wait %s: want whole milliseconds", *idemWait)
		}
		settings[idemenv.WaitMS] = strconv.FormatInt(idemWait.Milliseconds(), 10)
	}
	if *authTTL < 0 {
		return usageError(fs, stderr, "--authorizer-ttl must not be negative")
	}
	if *reqTimeout <= 0 {
		return usageError(fs, stderr, "--request-timeout must be positive")
	}
	if !addrOK(*addr) {
		return usageError(fs, stderr, "--addr %q: want HOST:PORT, PORT a number 0..65535, e.g. 127.0.0.1:3000", *addr)
	}
	if !tablePrefixOK(*prefix) {
		return usageError(fs, stderr, "--table-prefix %q: %s", *prefix, tablePrefixRule)
	}
	o := devstack.Options{Progress: stderr, Addr: *addr, Engine: *engine, Endpoint: *endpoint, TablePrefix: *prefix, NoTablePrefix: *prefix == "", Settings: settings, Getenv: os.Getenv, APIKeys: keys, ConformanceSeams: *seams, RequestTimeout: *reqTimeout, AuthorizerTTL: *authTTL,
		Stdout: stdout, Logger: slog.New(slog.NewJSONHandler(stderr, nil))}
	if *seams {
		switch os.Getenv(envSupervised) {
		case "":
			// The durability seam's kill modes need a process that
			// restarts this one: become it.
			return superviseDev(ctx, fs, o, stdout, stderr)
		case "1":
			o.Restart = supervisedRestart()
			if ks := supervisedKeys(); ks != nil && len(keys) == 0 {
				if err := devstack.CheckAPIKeys(ks); err != nil {
					fmt.Fprintf(stderr, "idemkit dev: %s: %v\n", envSupervisedKeys, err)
					return 1
				}
				o.APIKeys = ks
			}
		}
	}
	s, err := devstack.Start(ctx, o)
	if errors.Is(err, devstack.ErrConfig) {
		// A bad setting stops start-up before anything is started: one
		// line, naming each flag that set a variable the error names.
		var set []string
		for _, name := range slices.Sorted(maps.Keys(settings)) {
			if !strings.Contains(err.Error(), name+"=") {
				continue
			}
			flagName := "idempotency-wait" // IDEMPOTENCY_WAIT_MS
			for _, s := range hostsettings.Settings {
				if s.Name == name && s.Flag != "" {
					flagName = s.Flag
				}
			}
			set = append(set, "--"+flagName+" sets "+name)
		}
		msg := settingError(err, devstack.ErrConfig, hostsettings.ErrConfig, idem.ErrConfig)
		if len(set) > 0 {
			msg += " (" + strings.Join(set, ", ") + ")"
		}
		return usageError(fs, stderr, "%s", msg)
	}
	if ce := (*configerr.Error)(nil); errors.Is(err, kit.ErrConfig) && errors.As(err, &ce) {
		// A setting refused by the wiring, once the engine is known (a
		// finite RUN_RETENTION_DAYS without the completion transaction):
		// Start stopped what it had started.
		msg := settingError(errors.New(strings.Join(ce.Problems(), "; ")), hostsettings.ErrConfig, idem.ErrConfig)
		if !strings.HasPrefix(msg, "invalid setting: ") {
			msg = "invalid setting: " + msg
		}
		return usageError(fs, stderr, "%s", msg)
	}
	if err != nil && ctx.Err() != nil {
		// SIGINT or SIGTERM before dev served: Start stopped what it had
		// started, as a stop after it serves does; what the cancelled
		// start returned (context canceled, the engine's output) is no
		// failure to report.
		fmt.Fprintln(stderr, "idemkit dev: interrupted while starting; stopped what it had started")
		return 0
	}
	if err == nil {
		err = awaitDevStop(ctx, s, stderr)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		// The listener's own error ("listen tcp ...: bind: address already
		// in use") says nothing this line does not.
		other := otherAddr(o.Addr)
		fmt.Fprintf(stderr, "idemkit dev: --addr %s: address already in use (another idemkit dev?): pick another address with --addr, e.g. --addr %s (make run ARGS='--addr %s')\n", o.Addr, other, other)
		return 1
	}
	if oe := (*net.OpError)(nil); errors.As(err, &oe) && oe.Op == "listen" && oe.Err != nil {
		// Another listen failure of --addr (an address of no interface of
		// this machine, a host name that does not resolve, a port it may
		// not bind): said as the flag's, with what to give.
		fmt.Fprintf(stderr, "idemkit dev: --addr %s: cannot listen there (%v): give an address of this machine, e.g. --addr 127.0.0.1:3000\n", o.Addr, oe.Err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit dev: %s\n", storeErrorHint(err, unreachable))
		return 1
	}
	return 0
}

// awaitDevStop waits until the stack s has stopped and returns Stop's
// error. Once ctx ends (Ctrl-C, SIGTERM) the stack gives its requests in
// flight up to 10 s; when that takes more than a moment (Stack.Waiting)
// dev says so, and a second Ctrl-C (secondInterrupt) stops it at once, the
// requests cut, the engine stopped all the same; dev says it cut them
// only when there were some to cut (Stack.Cut).
func awaitDevStop(ctx context.Context, s *devstack.Stack, stderr io.Writer) error {
	select {
	case <-s.Done():
		return s.Stop()
	case <-ctx.Done():
	}
	select {
	case <-s.Done():
		return s.Stop()
	case <-s.Waiting():
		fmt.Fprintln(stderr, "idemkit dev: stopping: waiting up to 10s for the requests in flight to finish; Ctrl-C again stops at once")
	case <-secondInterrupt(ctx):
	}
	select {
	case <-s.Done():
		return s.Stop()
	case <-secondInterrupt(ctx):
	}
	err := s.StopNow()
	if s.Cut() {
		fmt.Fprintln(stderr, "idemkit dev: stopped at once: the requests still in flight were cut")
	}
	return err
}

// otherAddr is the address to suggest when addr is taken: the same host,
// the next port (3001 after 3000, 3000 after 65535).
func otherAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		return "127.0.0.1:3001"
	}
	if n >= 65535 || n <= 0 {
		n = 2999
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// addrOK reports whether addr is HOST:PORT with a numeric port the
// listener can bind (0: any free one), so that a port out of range is a
// usage error before anything starts, not a listen failure after.
func addrOK(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535 && port == strconv.Itoa(n)
}

// tablePrefixRule is what tablePrefixOK accepts, as a refusal says it.
const tablePrefixRule = "want letters, digits, '_', '-' and '.' only, at most 200 characters (DynamoDB's table names)"

// tablePrefixOK reports whether p can begin a DynamoDB table name: the
// characters a table name allows, short enough to leave room for the
// longest logical ID.
func tablePrefixOK(p string) bool {
	if len(p) > 200 {
		return false
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
