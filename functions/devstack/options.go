package devstack

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/ids"
	"github.com/idemkit/idemkit/internal/tables"
)

// DefaultAddr is the address the HTTP API listens on when Options.Addr is
// empty (`idemkit dev --addr`'s default).
const DefaultAddr = "127.0.0.1:3000"

// Options configures Start. The zero value is a working stack: a DynamoDB
// engine started on this machine, the tables of template.yaml named
// DefaultPrefix + logical ID, the HTTP API on DefaultAddr, two demo keys,
// no environment read, nothing printed or logged.
type Options struct {
	// Addr is the address the HTTP API listens on (default DefaultAddr;
	// "127.0.0.1:0" picks a free port, see Stack.URL). On every interface
	// (":3000", "0.0.0.0:3000", "[::]:3000") the stack names itself
	// http://localhost:PORT in Stack.URL, its links and its lines.
	Addr string
	// Engine is the DynamoDB engine to start, a name of the engine table
	// (internal/emulator: "dynamodb-local", "moto", "dynalite"). Default:
	// dynamodb-local when java is on PATH, else moto. It excludes Endpoint.
	Engine string
	// Endpoint is a DynamoDB endpoint to use instead of starting an engine
	// (tables are created if missing; a moto server is detected and reached
	// one request at a time). Default "": start Engine.
	Endpoint string
	// TablePrefix names the tables: prefix + logical ID (default
	// "idemkit-", the same as `idemkit tables create`).
	TablePrefix string
	// NoTablePrefix names each table by its logical ID alone (`idemkit dev
	// --table-prefix ""`, as `idemkit tables create --prefix ""` names
	// them), in place of TablePrefix's default. It excludes TablePrefix.
	NoTablePrefix bool
	// Settings are values of the settings table's variables by name
	// (settings.Settings; --policy sets IDEMPOTENCY_POLICY), over Getenv.
	// Default none.
	Settings map[string]string
	// Getenv reads the environment the functions read (os.Getenv for the
	// CLI), beneath Settings and over dev's own defaults; it also names
	// the engines' directory (IDEMKIT_TOOLS). Default nil: none is read.
	Getenv func(string) string
	// APIKeys are the API keys seeded into the api-keys table, each
	// "KEY=TENANT", cut at the last '=' (a key may hold '=', a tenantId
	// never does); every one carries the credential attributes every policy
	// scopes keys by, derived from TENANT. Default: two demo keys are minted
	// (Stack.APIKeys lists them; Stdout shows them).
	APIKeys []string
	// ConformanceSeams serves and advertises the OpenWOP conformance seams
	// profile (for running the conformance suite, never in production).
	// Default false.
	ConformanceSeams bool
	// Restart is the restart supervisor this stack runs under, which the
	// durability seam's kill modes need (only with ConformanceSeams).
	// Default nil: those modes answer 409 idemkit.durability_unsupervised.
	Restart *Restart
	// IdempotencyWait is how long a duplicate of an in-flight request
	// waits for its outcome (default 0: Layer 1's default, 5 s). An
	// IDEMPOTENCY_WAIT_MS in Settings or from Getenv takes its place
	// (`idemkit dev --idempotency-wait` sets it in Settings).
	IdempotencyWait time.Duration
	// RequestTimeout is each API request's deadline, store calls included
	// (default 0: DefaultRequestTimeout).
	RequestTimeout time.Duration
	// AuthorizerTTL is how long the gateway keeps an authorizer decision per
	// Authorization value, as API Gateway does (default 0: none kept, every
	// request asks the authorizer; the CLI's default is the deployed
	// ReauthorizeEvery, DeployedReauthorizeEvery).
	AuthorizerTTL time.Duration
	// Stdout receives what `idemkit dev` prints for its user: the demo keys,
	// the ready line, a curl to try (default nil: nothing).
	Stdout io.Writer
	// Logger receives the stack's JSON logs (default nil: none).
	Logger *slog.Logger
	// Progress receives the line announcing a first-use install of the
	// engines into the user's cache directory (default nil: none).
	Progress io.Writer
}

// withDefaults returns o with every default applied, or the ErrConfig
// error naming every problem of o.
func (o Options) withDefaults() (Options, error) {
	var l configerr.List
	if o.Engine != "" && o.Endpoint != "" {
		l.Addf("Options.Engine and Options.Endpoint exclude each other")
	}
	if o.Engine != "" {
		if _, err := emulator.Lookup(o.Engine); err != nil {
			l.Wrap(err)
		}
	}
	if o.IdempotencyWait < 0 {
		l.Addf("Options.IdempotencyWait must not be negative")
	}
	if o.RequestTimeout < 0 {
		l.Addf("Options.RequestTimeout must not be negative")
	}
	if o.AuthorizerTTL < 0 {
		l.Addf("Options.AuthorizerTTL must not be negative")
	}
	for i := range o.APIKeys {
		if err := CheckAPIKeys(o.APIKeys[:i+1]); err != nil {
			l.Addf("Options.APIKeys: %v", err)
		}
	}
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.NoTablePrefix && o.TablePrefix != "" {
		l.Addf("Options.NoTablePrefix and Options.TablePrefix exclude each other")
	}
	if o.TablePrefix == "" && !o.NoTablePrefix {
		o.TablePrefix = tables.DefaultPrefix
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.APIKeys = append([]string(nil), o.APIKeys...)
	// A bad setting stops start-up before anything is started.
	l.Wrap(checkSettings(o.TablePrefix, o.Settings, o.Getenv))
	return o, l.Err("devstack", ErrConfig)
}

// errAPIKey is CheckAPIKey's answer to a malformed seeded key.
var errAPIKey = errors.New("want KEY=TENANT (key: " + apikeys.KeyRule + ", as a request presents it in Authorization: Bearer KEY; tenant: " + ids.MintTenantRule + ")")

// errTildeTenant is CheckAPIKey's answer to a seeded key whose tenant holds
// a `~`, a tenantId the host must not mint run ids for.
var errTildeTenant = errors.New("the tenant holds a '~': a tenant may hold " + ids.MintTenantChars + " (a host must not mint run ids holding a '~')")

// CheckAPIKey checks one seeded key, "KEY=TENANT" (Options.APIKeys,
// `idemkit dev --api-key`): a key the authorizer accepts (apikeys.ValidKey,
// the rule it reads a bearer key with) and an OpenWOP tenantId without `~`
// (ids.MintableTenant).
func CheckAPIKey(kv string) error {
	key, tenant, ok := splitAPIKey(kv)
	if ok && apikeys.ValidKey(key) && runs.ValidTenant(tenant) && !ids.MintableTenant(tenant) {
		return errTildeTenant
	}
	if !ok || !apikeys.ValidKey(key) || !ids.MintableTenant(tenant) {
		return errAPIKey
	}
	return nil
}

// CheckAPIKeys checks the last of the seeded keys kvs as CheckAPIKey does,
// and that it does not give a key the others give for another tenant (a key
// authenticates one tenant).
func CheckAPIKeys(kvs []string) error {
	if len(kvs) == 0 {
		return nil
	}
	last := kvs[len(kvs)-1]
	if err := CheckAPIKey(last); err != nil {
		return err
	}
	key, tenant, _ := splitAPIKey(last)
	for _, kv := range kvs[:len(kvs)-1] {
		if k, t, _ := splitAPIKey(kv); k == key && t != tenant {
			return fmt.Errorf("this key is already given for tenant %s, here for %s: a key authenticates one tenant", t, tenant)
		}
	}
	return nil
}

// splitAPIKey cuts a seeded key "KEY=TENANT" into its key and tenant at
// the last '=': a key may hold '=' (apikeys.KeyRule allows it, as base64
// padding), a tenantId never does.
func splitAPIKey(kv string) (key, tenant string, ok bool) {
	i := strings.LastIndexByte(kv, '=')
	if i < 0 {
		return kv, "", false
	}
	return kv[:i], kv[i+1:], true
}
