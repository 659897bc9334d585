package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/ids"
)

const apikeyCreateAbout = `Mints a new API key for a tenant, stores its SHA-256 hash in the api-keys
table and prints the key once on stdout; the key itself is not stored.

--attr NAME=VALUE (repeatable) gives the key credential attributes: the
authorizer passes each to the api function in its context beside the
tenant, where a policy scopes idempotency keys by them under these exact
names (the commerce policy: namespace and worker; the ERP policy: clientId,
companyId and organizationId; a key without them is refused 401 there).
A name is 1..64 of a-z A-Z 0-9 _ starting with a letter (not tenantId); a
value 1..256 characters without control characters, not blank (white
space only).

--key - stores the key read from stdin (one line, a key a create minted
and printed: idk_ and 32 base64url characters) instead of minting one, with the --tenant and --attr it was created with:
API keys are regional, so this is how a key created in one region's table
is stored in another's, for a client that fails over to it. It prints
"stored key#HEX (tenant T)", never the key; the same key stored already
with that credential is the same line, and one stored with another is
refused, nothing changed. Revoke it in each region's table.

examples:
  idemkit apikey create --tenant acme --endpoint http://127.0.0.1:8000
  idemkit apikey create --tenant acme --attr namespace=shop --attr worker=checkout --endpoint http://127.0.0.1:8000
  idemkit apikey create --tenant acme --attr clientId=c1 --attr companyId=co1 --attr organizationId=o1 --endpoint http://127.0.0.1:8000
  idemkit apikey create --tenant acme --table prod-ApiKeysTable --region eu-west-1
  idemkit apikey create --tenant acme --key - --table prod-ApiKeysTable --region us-east-1 < key.txt
`

// attrForm is the form --attr takes, as a bad one's message says it
// (apikeys.ValidAttr's rules).
const attrForm = "want NAME=VALUE: NAME 1..64 of a-z A-Z 0-9 _ starting with a letter, not tenantId; VALUE 1..256 characters without control characters, not blank"

// attrFlag collects the --attr values as given; attrs checks them once the
// flags are parsed, so a bad one is said in the command's own words.
type attrFlag []string

func (a *attrFlag) String() string     { return strings.Join(*a, " ") }
func (a *attrFlag) Set(v string) error { *a = append(*a, v); return nil }

// attrs returns the credential attributes the --attr values give, or, for
// the first bad one, what is wrong with it: the value as given, the fault,
// and attrForm, in one line.
func (a attrFlag) attrs() (map[string]string, error) {
	out := map[string]string{}
	for _, v := range a {
		name, value, ok := strings.Cut(v, "=")
		var fault string
		switch {
		case !ok:
			fault = "no '=' between NAME and VALUE"
		case out[name] != "":
			fault = name + " is given twice"
		case apikeys.ValidAttr(name, value) == nil && strings.TrimSpace(value) != "":
			out[name] = value
			continue
		default:
			fault = attrFault(name, value, apikeys.ValidAttr(name, value))
		}
		return nil, fmt.Errorf("--attr %q: %s; %s", v, fault, attrForm)
	}
	return out, nil
}

// attrFault says which of apikeys.ValidAttr's rules, or the rule that a
// new key's value is not blank, name and value break (err, its refusal,
// when none of those it knows).
func attrFault(name, value string, err error) string {
	n := utf8.RuneCountInString(value)
	switch {
	case name == "":
		return "the name is empty"
	case name == "tenantId":
		return "tenantId is the tenant, not an attribute (--tenant)"
	case apikeys.ValidAttr(name, "v") != nil:
		return fmt.Sprintf("the name %q is not one NAME allows", name)
	case value == "":
		return "the value of " + name + " is empty"
	case !utf8.ValidString(value):
		return "the value of " + name + " is not UTF-8"
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return "the value of " + name + " holds a control character"
	case strings.TrimSpace(value) == "":
		// Refused when a key is made; a key stored with one before stays
		// readable (apikeys.ValidAttr accepts it).
		return "the value of " + name + " is blank"
	case n > 256:
		return fmt.Sprintf("the value of %s has %d characters", name, n)
	}
	return strings.TrimPrefix(err.Error(), apikeys.ErrCredentialInvalid.Error()+": ")
}

// runAPIKey dispatches `idemkit apikey SUBCOMMAND`.
func runAPIKey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return apikeyCommands.dispatch(ctx, args, stdout, stderr)
}

func runAPIKeyCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	setUsage(fs, "idemkit apikey create --tenant T [--attr NAME=VALUE]... [--key -] [--endpoint URL] [--table NAME] [--region R]", apikeyCreateAbout)
	tenant := fs.String("tenant", "", "tenant the key authenticates (tenantId grammar, without '~'); required")
	endpoint := endpointFlag(fs, "endpoint", "DynamoDB endpoint `URL` (emulator/LocalStack); default: AWS, with the default credential chain")
	table := fs.String("table", "", "api-keys table; default $"+settings.EnvAPIKeysTable+", or "+DefaultTablePrefix+"ApiKeysTable with --endpoint")
	region := fs.String("region", "", "region; default the AWS configuration's ("+emulator.Region+" with --endpoint)")
	var attrValues attrFlag
	fs.Var(&attrValues, "attr", "credential attribute NAME=VALUE passed to the authorizer context (repeatable), e.g. namespace=shop")
	keyFlag := fs.String("key", "", "- stores the key read from stdin (one line, as a create printed it: the same key in another region's table) instead of minting one")
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return unexpectedSecretArg(fs, stderr, pos[0])
	}
	if *tenant != "" && ids.ValidTenant(*tenant) && !ids.MintableTenant(*tenant) {
		return usageError(fs, stderr, "--tenant %q holds a '~': a tenant may hold %s (a host must not mint run ids holding a '~')", *tenant, ids.MintTenantChars)
	}
	if *tenant == "" {
		return usageError(fs, stderr, "--tenant T is required: the tenant the key authenticates, %s", ids.MintTenantRule)
	}
	if !ids.MintableTenant(*tenant) {
		return usageError(fs, stderr, "--tenant %q: want the tenant the key authenticates, %s", *tenant, ids.MintTenantRule)
	}
	attrs, err := attrValues.attrs()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	given := "" // the key --key - read, stored in place of a minted one
	if *keyFlag != "" {
		if *keyFlag != "-" {
			return usageError(fs, stderr, "--key takes - alone: the key is read from stdin (one line), which keeps it out of the shell history and the process list")
		}
		if given, code, done = stdinKey(ctx, fs, "create", "nothing stored", stderr); done {
			return code
		}
		// Only a key a create minted: its 192 random bits are what make
		// the unsalted hash the table keeps safe to keep; a key chosen by
		// hand could be guessed from a leaked table.
		if !apikeys.MintedKey(given) {
			return usageError(fs, stderr, "--key -: stdin holds no key 'idemkit apikey create' minted (idk_ and 32 base64url characters); only such a key is stored, its random bits keeping its stored hash safe")
		}
	}
	c, tbl, err := tableTarget(ctx, *endpoint, *table, *region, "--table", settings.EnvAPIKeysTable, "ApiKeysTable")
	if isTableUsage(err) {
		return usageError(fs, stderr, "%v", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit apikey create: %v\n", err)
		return 1
	}
	key := apikeys.NewAPIKey()
	if given != "" {
		key = given
	}
	cred := apikeys.Credential{Tenant: *tenant}
	if len(attrs) > 0 {
		cred.Attrs = attrs
	}
	keys := &apikeys.DynamoKeys{Client: c, Table: tbl}
	err = keys.PutCredential(ctx, key, cred)
	if given != "" && errors.Is(err, apikeys.ErrKeyExists) {
		// Stored before with this very credential (a run of this command
		// whose answer was lost, run again): done, as asked. Under another
		// tenant or other attributes it is not changed (RED_TEAM 446).
		if got, ok, gerr := keys.Credential(ctx, apikeys.HashKey(key)); gerr == nil && ok && got.Tenant == cred.Tenant && maps.Equal(got.Attrs, cred.Attrs) {
			err = nil
		} else if gerr == nil {
			fmt.Fprintf(stderr, "idemkit apikey create: api key %s already registered in table %s, for another tenant or with other attributes than these; nothing stored\n", apikeys.HashKey(key), tbl)
			return 1
		}
	}
	if err != nil && given != "" && !errors.As(err, new(*types.ResourceNotFoundException)) {
		// The key is the caller's: nothing to show or to revoke; the same
		// command says whether it was stored.
		fmt.Fprintf(stderr, "idemkit apikey create: %s; the key %s may have been stored: run the command again (it then says stored, or already registered with another credential)\n", storeError(err), apikeys.HashKey(key))
		return 1
	}
	if err != nil {
		if errors.As(err, new(*types.ResourceNotFoundException)) {
			where := "in region " + c.Options().Region
			if *endpoint != "" {
				where = "at " + shownURL(*endpoint)
			}
			fmt.Fprintf(stderr, "idemkit apikey create: table %q does not exist %s: name the api-keys table with --table (or $%s), or create it (idemkit tables create --only api-keys --endpoint URL; on AWS, deploy template.yaml)\n",
				tbl, where, settings.EnvAPIKeysTable)
			return 1
		}
		if errors.Is(err, apikeys.ErrAnswerLost) && !errors.Is(err, context.Canceled) {
			// The key may be stored, and is never shown: its hash is what
			// revokes it (RED_TEAM 366).
			fmt.Fprintf(stderr, "idemkit apikey create: %s; a try before got no answer and may have stored the key, which is not shown: revoke it (idemkit apikey revoke --hash %s, with this command's --table, --endpoint, --region) and create another\n",
				storeError(err), apikeys.HashKey(key))
			return 1
		}
		if errors.Is(err, context.Canceled) {
			// Ctrl-C while the write waited for its answer: it may have
			// stored the key, which is never shown; its hash revokes it
			// (RED_TEAM 414).
			fmt.Fprintf(stderr, "idemkit apikey create: %s; the key is not shown: revoke it (idemkit apikey revoke --hash %s, with this command's --table, --endpoint, --region; \"no key\" means it was not stored)\n",
				storeError(err), apikeys.HashKey(key))
			return 1
		}
		fmt.Fprintf(stderr, "idemkit apikey create: %s\n", storeError(err))
		return 1
	}
	if given != "" {
		// The caller's key is never printed: its hash names it.
		if _, err := fmt.Fprintf(stdout, "stored %s (tenant %s)\n", apikeys.HashKey(key), *tenant); err != nil {
			fmt.Fprintf(stderr, "idemkit apikey create: the key %s was stored for tenant %s, but this could not be printed (%v)\n", apikeys.HashKey(key), *tenant, err)
			return 1
		}
		return 0
	}
	// The key is shown once; only its SHA-256 hash is stored.
	if err := printOnce(stdout, key); err != nil {
		fmt.Fprintf(stderr, "idemkit apikey create: the key was stored for tenant %s but could not be printed (%v), and it is shown nowhere else: revoke it (idemkit apikey revoke --hash %s, with this command's --table, --endpoint, --region) and create another\n",
			*tenant, err, apikeys.HashKey(key))
		return 1
	}
	return 0
}

const apikeyRevokeAbout = `Revokes an API key: deletes its item (its SHA-256 hash and tenant) from the
api-keys table and prints "revoked key#HEX (tenant T)". Name the key by the
key itself, as 'idemkit apikey create' printed it (--key KEY, or --key -
to read it from stdin, which keeps it out of the shell history and the
process list), or by its stored hash (--hash, the table item's pk
"key#HEX", or the 64 hex digits 'printf %s KEY | sha256sum' prints).
--tenant T revokes the key only if it is T's. A key not in the table is a
failure (exit 1), but when a try of the delete got no answer and the retry
finds no key, that try revoked it or it was already gone: it prints
"revoked key#HEX (tenant unknown: the delete's answer was lost)" (exit 0).

The authorizer refuses the key at its next lookup, but API Gateway keeps
each authorizer decision for the HTTP API's ReauthorizeEvery (300 s in
template.yaml; idemkit dev for its --authorizer-ttl): a client whose grant
is cached may be served until it expires. Each region has its own api-keys
table: a key stored in several (apikey create --key -) is revoked in each.

examples:
  idemkit apikey revoke --key - --endpoint http://127.0.0.1:8000 < key.txt
  idemkit apikey revoke --hash key#3f0c…e9 --tenant acme --table prod-ApiKeysTable --region eu-west-1
`

// stdin is what `apikey create --key -` and `apikey revoke --key -` read
// (tests replace it).
var stdin io.Reader = os.Stdin

// hashForm is what --hash accepts, as a bad one's message says it.
// hashShaped reports whether v reads as a stored hash mistyped: key#
// (any letter case) or nothing before hex digits alone. Such a value is
// quoted when refused; any other is not, since it may hold the key.
func hashShaped(v string) bool {
	h := strings.ToLower(v)
	h = strings.TrimPrefix(h, "key#")
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !('0' <= h[i] && h[i] <= '9' || 'a' <= h[i] && h[i] <= 'f') {
			return false
		}
	}
	return true
}

const hashForm = "want the key's stored hash, key# and 64 hex digits (the api-keys item's pk), or the 64 hex digits alone"

// readKeyLine returns the first line of r (at most a key, its line break
// and a little more), or, once ctx ends (Ctrl-C, SIGTERM: the command
// has taken both over), ctx's error at once, whether or not r has sent
// anything: a read of a terminal or an open pipe would not end by itself.
func readKeyLine(ctx context.Context, r io.Reader) (string, error) {
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() { // left blocked on r if ctx ends first; the command exits
		line, err := bufio.NewReader(io.LimitReader(r, apikeys.MaxKeyLen+6)).ReadString('\n')
		if err == io.EOF {
			err = nil
		}
		got <- result{line, err}
	}()
	select {
	case res := <-got:
		return res.line, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stdinKey reads `--key -`'s key from stdin (one line; a UTF-8
// byte-order mark and the white space around it dropped) for `apikey
// cmd`: the key, or the exit code to return (done) after saying why there
// is none (nothing, what was not done, when interrupted).
func stdinKey(ctx context.Context, fs *flag.FlagSet, cmd, nothing string, stderr io.Writer) (key string, code int, done bool) {
	line, err := readKeyLine(ctx, stdin)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "idemkit apikey %s: interrupted while reading the key from stdin; %s\n", cmd, nothing)
		return "", 1, true
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit apikey %s: read the key from stdin: %v\n", cmd, err)
		return "", 1, true
	}
	if strings.HasPrefix(line, "\xff\xfe") || strings.HasPrefix(line, "\xfe\xff") {
		return "", usageError(fs, stderr, "--key -: stdin is UTF-16 text; give the key as one line of ASCII (%s)", apikeys.KeyRule), true
	}
	// A key file saved with a UTF-8 byte-order mark (as some editors
	// save text) holds the key after the mark.
	k := strings.TrimSpace(strings.TrimPrefix(line, "\ufeff"))
	if !apikeys.ValidKey(k) {
		return "", usageError(fs, stderr, "--key -: stdin holds no key (want one line, the key as 'apikey create' printed it: %s)", apikeys.KeyRule), true
	}
	return k, 0, false
}

func runAPIKeyRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apikey revoke", flag.ContinueOnError)
	setUsage(fs, "idemkit apikey revoke (--key KEY | --key - | --hash HASH) [--tenant T] [--endpoint URL] [--table NAME] [--region R]", apikeyRevokeAbout)
	keyFlag := fs.String("key", "", "the key to revoke, as 'apikey create' printed it; - reads it from stdin (one line)")
	hashFlag := fs.String("hash", "", "the stored hash of the key to revoke: key#HEX (the item's pk) or the 64 hex digits of its SHA-256")
	tenant := fs.String("tenant", "", "revoke the key only if it authenticates this tenant")
	endpoint := endpointFlag(fs, "endpoint", "DynamoDB endpoint `URL` (emulator/LocalStack); default: AWS, with the default credential chain")
	table := fs.String("table", "", "api-keys table; default $"+settings.EnvAPIKeysTable+", or "+DefaultTablePrefix+"ApiKeysTable with --endpoint")
	region := fs.String("region", "", "region; default the AWS configuration's ("+emulator.Region+" with --endpoint)")
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return unexpectedSecretArg(fs, stderr, pos[0])
	}
	var hash string
	switch {
	case *keyFlag == "" && *hashFlag == "":
		return usageError(fs, stderr, "--key KEY (or --key - to read it from stdin) or --hash HASH is required")
	case *keyFlag != "" && *hashFlag != "":
		return usageError(fs, stderr, "--key and --hash exclude each other: name the key one way")
	case *keyFlag == "-":
		k, code, done := stdinKey(ctx, fs, "revoke", "nothing revoked", stderr)
		if done {
			return code
		}
		hash = apikeys.HashKey(k)
	case *keyFlag != "":
		if !apikeys.ValidKey(*keyFlag) {
			return usageError(fs, stderr, "--key: want the key as 'apikey create' printed it (%s); a key stored outside that rule is revoked by --hash", apikeys.KeyRule)
		}
		hash = apikeys.HashKey(*keyFlag)
	default:
		hash = strings.ToLower(*hashFlag)
		if !strings.HasPrefix(hash, "key#") {
			hash = "key#" + hash
		}
		if !apikeys.ValidHash(hash) {
			if !hashShaped(*hashFlag) {
				// Not quoted: it may be the key itself, given for its
				// hash (RED_TEAM 540), or the key with what surrounded
				// it where it was copied from ("Bearer ", a space, a
				// carriage return: 563), and stderr goes to CI logs and
				// shared terminals.
				return usageError(fs, stderr, "--hash (not shown; it may be the key itself): %s; to revoke by the key, give --key - and the key on stdin", hashForm)
			}
			return usageError(fs, stderr, "--hash %q: %s", *hashFlag, hashForm)
		}
	}
	if *tenant != "" && !ids.ValidTenant(*tenant) {
		return usageError(fs, stderr, "--tenant %q: want the tenant the key authenticates, %s", *tenant, ids.TenantRule)
	}
	c, tbl, err := tableTarget(ctx, *endpoint, *table, *region, "--table", settings.EnvAPIKeysTable, "ApiKeysTable")
	if isTableUsage(err) {
		return usageError(fs, stderr, "%v", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit apikey revoke: %v\n", err)
		return 1
	}
	where := "in region " + c.Options().Region
	if *endpoint != "" {
		where = "at " + shownURL(*endpoint)
	}
	owner, err := apikeys.Revoke(ctx, c, tbl, hash, *tenant)
	lost := errors.Is(err, apikeys.ErrAnswerLost)
	switch {
	case lost && errors.Is(err, apikeys.ErrKeyNotFound):
		// The key is gone, which is what was asked; whether this command's
		// unanswered try or an earlier revoke deleted it, no answer says
		// (RED_TEAM 364).
		fmt.Fprintf(stdout, "revoked %s (tenant unknown: the delete's answer was lost)\n", hash)
		fmt.Fprintf(stderr, "idemkit apikey revoke: a try of the delete got no answer (its connection was lost after it was sent, or the engine failed), and the retry found no key %s in table %s %s: that try revoked it, or it was already gone\n", hash, tbl, where)
		revokeCacheNotice(*endpoint, stderr)
		return 0
	case errors.Is(err, apikeys.ErrKeyNotFound):
		fmt.Fprintf(stderr, "idemkit apikey revoke: no key %s in table %s %s (already revoked, or another table: --table, $%s); nothing revoked\n", hash, tbl, where, settings.EnvAPIKeysTable)
		return 1
	case errors.Is(err, apikeys.ErrKeyOtherTenant):
		fmt.Fprintf(stderr, "idemkit apikey revoke: key %s belongs to another tenant than %s (%s); nothing revoked\n", hash, *tenant, owner)
		return 1
	case errors.As(err, new(*types.ResourceNotFoundException)):
		fmt.Fprintf(stderr, "idemkit apikey revoke: table %q does not exist %s: name the api-keys table with --table (or $%s)\n", tbl, where, settings.EnvAPIKeysTable)
		return 1
	case err != nil && lost && !errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "idemkit apikey revoke: %s; a try before got no answer and may have revoked it: run the revoke again (\"no key\" then means it did)\n", storeError(err))
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "idemkit apikey revoke: %s\n", storeError(err))
		return 1
	}
	fmt.Fprintf(stdout, "revoked %s (tenant %s)\n", hash, owner)
	revokeCacheNotice(*endpoint, stderr)
	return 0
}

// revokeCacheNotice says on stderr, after a revoke, that API Gateway's
// cache of authorizer decisions may keep granting the key until it
// expires (with endpoint, idemkit dev's cache).
func revokeCacheNotice(endpoint string, stderr io.Writer) {
	if ttl, err := devstack.DeployedReauthorizeEvery(); err == nil && ttl > 0 {
		// Against an endpoint the gateway is most likely idemkit dev's,
		// whose cache is its own --authorizer-ttl (default ttl).
		dev := ""
		if endpoint != "" {
			dev = fmt.Sprintf("; idemkit dev keeps its decisions for its --authorizer-ttl (default %s)", ttl)
		}
		fmt.Fprintf(stderr, "idemkit apikey revoke: the authorizer refuses it from its next lookup; API Gateway's cache of authorizer decisions (ReauthorizeEvery, %s) may keep granting it to a client it granted until that expires%s\n", ttl, dev)
	}
}

// apikeyCommands are the commands of `idemkit apikey`.
var apikeyCommands = commandList{
	group: "apikey",
	about: "Manage the API keys the authorizer accepts.",
	entries: []entry{
		{"create", "mint an API key for a tenant and store its hash", runAPIKeyCreate},
		{"revoke", "revoke an API key (by the key or its stored hash): delete its item", runAPIKeyRevoke},
	},
	examples: []string{
		"idemkit apikey create --tenant acme --endpoint http://127.0.0.1:8000",
		"idemkit apikey revoke --key - --endpoint http://127.0.0.1:8000 < key.txt",
	},
}
