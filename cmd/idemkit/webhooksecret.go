package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/ids"
)

// maxGrace bounds how long a replaced signing secret keeps signing.
const maxGrace = 30 * 24 * time.Hour

const webhookSecretRotateAbout = `Gives a tenant a new webhook signing secret and prints it once on stdout
("whsec_" and the base64 of 32 random bytes, the Standard Webhooks form): hand
it to the tenant's receiver, which verifies each delivery's webhook-signature
with it. The secret is kept in the api-keys table (an item "whsec#TENANT",
which only the executor's role may read); it is never printed again, and no
command shows a stored one.

The secret it replaces keeps signing for --grace (default 24h): until then
every delivery carries two signatures, the new secret's and the previous
one's, so a receiver that still holds the previous secret accepts it while
it moves to the new one. --grace 0 stops the previous secret within a
minute (a secret that leaked): until each executor rereads the tenant's
secrets, at most a minute on, it may sign with the previous secret alone,
so a receiver that drops it at once answers such a delivery 503, which is
tried again, never a 4xx, which fails it for good. A rotation within an earlier one's grace keeps that
earlier secret signing too, until its own grace ends: each delivery then
carries one signature per secret still in its grace, the newest first. At
most 4 replaced secrets are kept: a rotation with a grace that would keep a
fifth is refused (exit 1, nothing written), naming when the first of their
graces ends; rotate from then on, or with --grace 0. Each executor reads a tenant's secrets at most once a
minute, so a rotation signs deliveries within a minute; a grace shorter
than that is refused.

A tenant without a secret gets its deliveries unsigned; its first rotation
starts signing them within a minute (until then they may still go
unsigned: a receiver that already verifies answers such a delivery 503).

--secret - writes the secret read from stdin (one line, as a rotation
printed it) instead of a new one, and prints nothing on stdout: the same
secret in another region's api-keys table, so one receiver secret verifies
the deliveries of every region. Given again, it writes nothing.

examples:
  idemkit webhook secret rotate --tenant acme --endpoint http://127.0.0.1:8000
  idemkit webhook secret rotate --tenant acme --grace 72h --table prod-ApiKeysTable --region eu-west-1
  idemkit webhook secret rotate --tenant acme --secret - --table prod-ApiKeysTable --region us-west-2 < secret.txt
`

const webhookSecretRemoveAbout = `Removes a tenant's webhook signing secrets (the current one and any replaced
one still in its grace) from the api-keys table: the tenant's deliveries are
sent unsigned again, at the latest a minute later (each executor's cache).
Prints "removed the signing secret of tenant T".

example:
  idemkit webhook secret remove --tenant acme --endpoint http://127.0.0.1:8000
`

// secretTableFlags adds the flags naming the api-keys table.
func secretTableFlags(fs *flag.FlagSet) (endpoint, table, region *string) {
	endpoint = endpointFlag(fs, "endpoint", "DynamoDB endpoint `URL` (emulator/LocalStack); default: AWS, with the default credential chain")
	table = fs.String("table", "", "api-keys table; default $"+settings.EnvAPIKeysTable+", or "+DefaultTablePrefix+"ApiKeysTable with --endpoint")
	region = fs.String("region", "", "region; default the AWS configuration's ("+emulator.Region+" with --endpoint)")
	return
}

// secretTable opens the api-keys table the flags name for the command
// cmd ("idemkit webhook secret rotate"); on a refusal it has written the
// message and ok is false.
func secretTable(ctx context.Context, fs *flag.FlagSet, stderr io.Writer, cmd, endpoint, table, region string) (c *dynamodb.Client, tbl string, code int, ok bool) {
	c, tbl, err := tableTarget(ctx, endpoint, table, region, "--table", settings.EnvAPIKeysTable, "ApiKeysTable")
	if isTableUsage(err) {
		return nil, "", usageError(fs, stderr, "%v", err), false
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return nil, "", 1, false
	}
	return c, tbl, 0, true
}

// tableWhere names where the flags point: "at URL" with --endpoint, else
// "in region R".
func tableWhere(c *dynamodb.Client, endpoint string) string {
	if endpoint != "" {
		return "at " + shownURL(endpoint)
	}
	return "in region " + c.Options().Region
}

// secretTableMissing writes the refusal for an api-keys table that does
// not exist where the flags point.
func secretTableMissing(stderr io.Writer, cmd string, c *dynamodb.Client, tbl, endpoint string) int {
	fmt.Fprintf(stderr, "%s: table %q does not exist %s: name the api-keys table with --table (or $%s)\n", cmd, tbl, tableWhere(c, endpoint), settings.EnvAPIKeysTable)
	return 1
}

// secretTenant checks --tenant: required, and a tenant a credential can
// carry.
func secretTenant(fs *flag.FlagSet, stderr io.Writer, tenant string) (int, bool) {
	if tenant == "" {
		return usageError(fs, stderr, "--tenant T is required: the tenant whose deliveries the secret signs, %s", ids.TenantRule), false
	}
	if !ids.ValidTenant(tenant) {
		return usageError(fs, stderr, "--tenant %q: want the tenant whose deliveries the secret signs, %s", tenant, ids.TenantRule), false
	}
	return 0, true
}

func runWebhookSecretRotate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("webhook secret rotate", flag.ContinueOnError)
	setUsage(fs, "idemkit webhook secret rotate --tenant T [--grace DURATION] [--secret -] [--endpoint URL] [--table NAME] [--region R]", webhookSecretRotateAbout)
	tenant := fs.String("tenant", "", "tenant whose deliveries the secret signs (tenantId grammar); required")
	graceFlag := fs.String("grace", "24h", "how long the replaced secret keeps signing beside the new one: 0, or 1m..720h (a Go duration: 90m, 24h)")
	secretFlag := fs.String("secret", "", "- writes the secret read from stdin (one line) instead of a new one: the same secret in another region's table")
	endpoint, table, region := secretTableFlags(fs)
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return unexpectedSecretArg(fs, stderr, pos[0])
	}
	if code, ok := secretTenant(fs, stderr, *tenant); !ok {
		return code
	}
	grace, err := time.ParseDuration(*graceFlag)
	if err != nil || grace < 0 || grace > maxGrace || grace > 0 && grace < apikeys.DefaultSecretCacheTTL {
		return usageError(fs, stderr, "--grace %q: want 0 (the previous secret stops within a minute) or a duration from 1m to 720h, such as 24h (an executor may sign with the previous secret alone for up to a minute after the rotation)", *graceFlag)
	}
	var given string
	if *secretFlag != "" {
		if *secretFlag != "-" {
			// Not quoted: it may be the secret itself.
			return usageError(fs, stderr, "--secret takes - alone: the secret is read from stdin (one line), which keeps it out of the shell history and the process list")
		}
		line, err := readKeyLine(ctx, stdin)
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "idemkit webhook secret rotate: interrupted while reading the secret from stdin; nothing written")
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "idemkit webhook secret rotate: read the secret from stdin: %v\n", err)
			return 1
		}
		given = strings.TrimSpace(strings.TrimPrefix(line, "\ufeff"))
		if _, err := apikeys.ParseSigningSecret(given); err != nil {
			return usageError(fs, stderr, "--secret -: stdin holds no signing secret (%v; want one line, as a rotation printed it)", err)
		}
	}
	c, tbl, code, ok := secretTable(ctx, fs, stderr, "idemkit webhook secret rotate", *endpoint, *table, *region)
	if !ok {
		return code
	}
	rot, err := apikeys.RotateSigningSecret(ctx, c, tbl, *tenant, given, grace, time.Now())
	var limit *apikeys.GraceLimitError
	switch {
	case errors.Is(err, apikeys.ErrRotatedConcurrently):
		fmt.Fprintf(stderr, "idemkit webhook secret rotate: tenant %s's signing secret changed while this rotation ran (another rotation or a removal); nothing written: run it again\n", *tenant)
		return 1
	case errors.As(err, &limit):
		fmt.Fprintf(stderr, "idemkit webhook secret rotate: tenant %s already has %d replaced secrets signing in their graces, the most kept; the first of those graces ends at %s: rotate from then on, or now with --grace 0 (the current secret stops signing within a minute); nothing written\n",
			*tenant, apikeys.MaxPreviousSecrets, limit.Until.UTC().Format(time.RFC3339))
		return 1
	case errors.As(err, new(*types.ResourceNotFoundException)):
		return secretTableMissing(stderr, "idemkit webhook secret rotate", c, tbl, *endpoint)
	case err != nil && errors.Is(err, apikeys.ErrAnswerLost) && !errors.Is(err, context.Canceled):
		// RED_TEAM 366.
		if given != "" {
			fmt.Fprintf(stderr, "idemkit webhook secret rotate: %s; a try before got no answer and may have written the secret given: run the rotation again (it says the secret is already this one if it did)\n", storeError(err))
			return 1
		}
		fmt.Fprintf(stderr, "idemkit webhook secret rotate: %s; a try before got no answer and may have written a new secret for tenant %s, which is not shown (its deliveries may be signed with it): run the rotation again\n", storeError(err), *tenant)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "idemkit webhook secret rotate: %s\n", storeError(err))
		return 1
	}
	if rot.Unchanged {
		fmt.Fprintf(stderr, "idemkit webhook secret rotate: tenant %s's current secret is already this one; nothing written\n", *tenant)
		return 0
	}
	if given == "" {
		// A new secret is shown once, here, and nowhere else.
		if err := printOnce(stdout, rot.Secret); err != nil {
			msg := fmt.Sprintf("idemkit webhook secret rotate: a new secret was written for tenant %s, and signs its deliveries from at most a minute on, but could not be printed (%v), and it is shown nowhere else", *tenant, err)
			if !rot.PreviousUntil.IsZero() {
				msg += "; the previous one signs too until " + rot.PreviousUntil.UTC().Format(time.RFC3339)
			}
			fmt.Fprintln(stderr, msg+": run the rotation again and hand the receiver the secret it prints")
			return 1
		}
	}
	if rot.PreviousUntil.IsZero() && len(rot.Earlier) == 0 {
		fmt.Fprintf(stderr, "idemkit webhook secret rotate: tenant %s's deliveries are signed with this secret alone from at most a minute on\n", *tenant)
		return 0
	}
	msg := fmt.Sprintf("idemkit webhook secret rotate: tenant %s's deliveries are signed with this secret from at most a minute on", *tenant)
	if !rot.PreviousUntil.IsZero() {
		msg += ", and with the previous one too until " + rot.PreviousUntil.UTC().Format(time.RFC3339)
	}
	if len(rot.Earlier) > 0 {
		ends := make([]string, len(rot.Earlier))
		for i, u := range rot.Earlier {
			ends[i] = u.UTC().Format(time.RFC3339)
		}
		msg += fmt.Sprintf(", and with %d secret(s) replaced before it too, each until its grace ends (%s)", len(rot.Earlier), strings.Join(ends, ", "))
	}
	fmt.Fprintln(stderr, msg)
	return 0
}

func runWebhookSecretRemove(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("webhook secret remove", flag.ContinueOnError)
	setUsage(fs, "idemkit webhook secret remove --tenant T [--endpoint URL] [--table NAME] [--region R]", webhookSecretRemoveAbout)
	tenant := fs.String("tenant", "", "tenant whose signing secrets to remove (tenantId grammar); required")
	endpoint, table, region := secretTableFlags(fs)
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return unexpectedSecretArg(fs, stderr, pos[0])
	}
	if code, ok := secretTenant(fs, stderr, *tenant); !ok {
		return code
	}
	c, tbl, code, ok := secretTable(ctx, fs, stderr, "idemkit webhook secret remove", *endpoint, *table, *region)
	if !ok {
		return code
	}
	found, err := apikeys.RemoveSigningSecret(ctx, c, tbl, *tenant)
	switch {
	case errors.As(err, new(*types.ResourceNotFoundException)):
		return secretTableMissing(stderr, "idemkit webhook secret remove", c, tbl, *endpoint)
	case err != nil && errors.Is(err, apikeys.ErrAnswerLost) && !errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "idemkit webhook secret remove: %s; a try before got no answer and may have removed it: run the removal again (\"no signing secret\" then means it did)\n", storeError(err)) // RED_TEAM 366
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "idemkit webhook secret remove: %s\n", storeError(err))
		return 1
	case !found:
		fmt.Fprintf(stderr, "idemkit webhook secret remove: tenant %s has no signing secret in table %s %s (its deliveries are unsigned; or another table: --table, $%s); nothing removed\n", *tenant, tbl, tableWhere(c, *endpoint), settings.EnvAPIKeysTable)
		return 1
	}
	fmt.Fprintf(stdout, "removed the signing secret of tenant %s\n", *tenant)
	return 0
}

// runWebhook dispatches `idemkit webhook SUBCOMMAND`.
func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return webhookCommands.dispatch(ctx, args, stdout, stderr)
}

// runWebhookSecret dispatches `idemkit webhook secret SUBCOMMAND`.
func runWebhookSecret(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return webhookSecretCommands.dispatch(ctx, args, stdout, stderr)
}

// webhookCommands are the commands of `idemkit webhook`.
var webhookCommands = commandList{
	group: "webhook",
	about: "Manage what the host's webhook deliveries carry.",
	entries: []entry{
		{"secret rotate", "give a tenant a new signing secret (printed once; the previous one signs too for a grace)", runWebhookSecret},
		{"secret remove", "remove a tenant's signing secrets: its deliveries are unsigned again", runWebhookSecret},
	},
	examples: []string{
		"idemkit webhook secret rotate --tenant acme --endpoint http://127.0.0.1:8000",
	},
}

// webhookSecretCommands are the commands of `idemkit webhook secret`.
var webhookSecretCommands = commandList{
	group: "webhook secret",
	about: "Manage the tenants' webhook signing secrets (Standard Webhooks signatures).",
	entries: []entry{
		{"rotate", "give a tenant a new signing secret (printed once; the previous one signs too for a grace)", runWebhookSecretRotate},
		{"remove", "remove a tenant's signing secrets: its deliveries are unsigned again", runWebhookSecretRemove},
	},
	examples: []string{
		"idemkit webhook secret rotate --tenant acme --endpoint http://127.0.0.1:8000",
		"idemkit webhook secret remove --tenant acme --endpoint http://127.0.0.1:8000",
	},
}
