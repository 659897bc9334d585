package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/idemkit/idemkit/cmd/idemkit/internal/conform"
)

var conformUsageLine = `idemkit conform [--api-key KEY]... [--route 'POST /runs'] [--body JSON] [--profile ` + conform.ProfileList("|") + `] URL
       [--scope-key PART=KEY]... [--other-route 'POST /runs/{id}/cancel'] [--fail-body JSON]
       [--failed-run-body JSON] [--retry-route 'POST /runs/{id}/retry']
       [--test-route 'POST /api/v1/inbound/work-orders/test'] [--test-body JSON] [--mode-header NAME]
       [--slow-body JSON] [--invalid-body JSON] [--get PATH] [--timeout D] [--stagger D]`

const conformAbout = `Checks the Layer-1 (Idempotency-Key) behaviour of the API at URL from the
outside, one line per scenario (each scenario is one rule of the policy),
then "N passed, M failed". The exit status is 0 when nothing failed, 1 when
a scenario failed, 2 on a usage error. At least one --api-key is required.
The defaults fit 'idemkit dev'. A profile checks an API that serves its
policy: when the API advertises another (an idemkit host's GET
/.well-known/openwop), conform says so on stderr first. A scenario that
sends a duplicate while a slow first request runs tries again with a new
key, up to three times, when the duplicate may have reached the API out of
turn (a loaded machine), and says which try gave its verdict.

profiles:
  openwop   the OpenWOP default policy (default); a second --api-key (another
            tenant) enables tenant-isolation (the other profiles do not use
            one, and say so on stderr)
  commerce  the commerce policy: any key of up to 255 characters, never split at
            a comma; the key binds the operation and the input (409
            idempotency-mismatch, on --other-route too); Idempotent-Replayed;
            a duplicate of a pending request waits (sync) or, sent with
            'Idempotency-Mode: async' (--mode-header), gets the pending action
            at once: the pending Action, which names no run or the first
            request's, and a run it names must exist (read by GET at once);
            a replay after the Action settled is the Action in its final
            status; with --failed-run-body
            a failed one too, and --retry-route links the retry by on; GET's
            strong ETag and If-Match of a stale version refused; the refused
            write waits in the caller's own inbox; rejections at the door record nothing; a
            failed action (--fail-body) is replayed as failed. --scope-key
            namespace=KEY and worker=KEY enable scope-namespace, scope-worker
            and inbox-private
  erp       the ERP policy: keys 8..128 of A-Z a-z 0-9 . _ : -, whitespace and
            duplicate headers rejected, ERP error codes and envelope (request_id),
            409 with Retry-After: 2, X-Request-ID, key echo,
            Idempotency-Replayed, Idempotency-Original-Request-ID, a 5xx retried
            (failed_retryable), the key scoped by route (--other-route) and the
            public --test-route; the live work-order route with JSON and XML
            bodies of one work order replaying each other, in XML for
            'Accept: application/xml'; X-Request-ID and request_id on 401,
            404, 405 and 415 too. --scope-key client=KEY, company=KEY and
            organization=KEY enable scope-client, scope-company and
            scope-organization

A --scope-key credential must differ from the first --api-key in that part
only (same namespace and another worker, and so on).

examples:
  idemkit conform --api-key KEY1 --api-key KEY2 http://127.0.0.1:3000
  idemkit conform --profile commerce --api-key KEY --scope-key namespace=KEY_OTHER_NS \
      --scope-key worker=KEY_OTHER_WORKER http://127.0.0.1:3000
  idemkit conform --profile erp --api-key KEY --scope-key client=KEY_C2 \
      --scope-key company=KEY_CO2 --scope-key organization=KEY_O2 http://127.0.0.1:3000
  idemkit conform --api-key KEY --route 'POST /orders' --body '{"sku":"A-17"}' https://api.example.com
`

// runConform implements `idemkit conform`: args are the arguments after
// "conform". It returns the process exit status.
func runConform(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conform", flag.ContinueOnError)
	setUsage(fs, conformUsageLine, conformAbout)
	var (
		cfg     conform.Config
		profile string
	)
	fs.Func("api-key", "API key sent as 'Authorization: Bearer KEY'; repeat for a second tenant (at most two)", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("empty API key")
		}
		cfg.APIKeys = append(cfg.APIKeys, s)
		return nil
	})
	fs.StringVar(&cfg.Route, "route", conform.DefaultRoute, "the mutating operation checked, 'METHOD /path'")
	fs.StringVar(&cfg.Body, "body", conform.DefaultBody, "a valid JSON object body for the route")
	fs.StringVar(&profile, "profile", string(conform.ProfileOpenWOP), "rule set: openwop (the OpenWOP default policy), commerce (the commerce policy) or erp (the ERP policy)")
	fs.Func("scope-key", "PART=KEY: an API key whose credential differs from the first --api-key in PART only (commerce: namespace, worker; erp: client, company, organization); repeatable", func(s string) error {
		part, key, ok := strings.Cut(s, "=")
		if !ok || part == "" || strings.TrimSpace(key) == "" {
			return errors.New("want PART=KEY")
		}
		if cfg.ScopeKeys == nil {
			cfg.ScopeKeys = map[string]string{}
		}
		if _, dup := cfg.ScopeKeys[part]; dup {
			return fmt.Errorf("scope part %q given twice", part)
		}
		cfg.ScopeKeys[part] = key
		return nil
	})
	fs.StringVar(&cfg.OtherRoute, "other-route", "", "a second mutating route on the created resource, {id} standing for its runId/id (commerce: the key is bound to its operation; erp: scoped by route); default: POST + the route's path + /{id}/cancel")
	fs.StringVar(&cfg.FailedRunBody, "failed-run-body", "", "commerce: a valid body whose Action is created and then fails (replayed as failed; retried by --retry-route, linked by on); default none: retry-on-link is skipped")
	fs.StringVar(&cfg.RetryRoute, "retry-route", "", "commerce: Action.retry of a failed Action, 'METHOD /path' with {id}; default POST <route>/{id}/retry")
	fs.StringVar(&cfg.FailBody, "fail-body", "", "a valid body whose action fails with a 5xx (commerce: replayed as failed; erp: retried); default: "+conform.DefaultFailBody+" with the default body, else the failure scenario is skipped")
	fs.StringVar(&cfg.TestRoute, "test-route", conform.DefaultTestRoute, "erp: the public format-validation route, 'METHOD /path'")
	fs.StringVar(&cfg.TestBody, "test-body", "", "erp: the body sent to --test-route; default: --body")
	fs.StringVar(&cfg.ModeHeader, "mode-header", conform.DefaultModeHeader, "commerce: the request header of a call's wait mode (sync|async)")
	fs.StringVar(&cfg.SlowBody, "slow-body", "", "a valid body slow enough to overlap a duplicate (in-flight scenario); default: the conformance-delay fixture with the default body, else --body")
	fs.StringVar(&cfg.InvalidBody, "invalid-body", "", "a body rejected with 400 validation_error; default: "+conform.DefaultInvalidBody+" with the default body, else {}")
	fs.StringVar(&cfg.GetPath, "get", "", "GET path of a created resource, {id} standing for its runId/id; default: the route's path + /{id}")
	fs.DurationVar(&cfg.Timeout, "timeout", conform.DefaultTimeout, "bound on each request, and on a duplicate's wait")
	fs.DurationVar(&cfg.Stagger, "stagger", conform.DefaultStagger, "how long the slow request runs before its duplicates are sent")

	// Flags may come before or after the URL.
	pos, code, done := parseFlags(fs, args, true, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, stderr, "want exactly one URL")
	}
	if u, err := url.Parse(pos[0]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if mayBeSecret(pos[0], ".:/") {
			// No URL, even one without its scheme, but perhaps the key
			// given for --api-key, alone or with what surrounded it: not
			// quoted (RED_TEAM 564, 583).
			return usageError(fs, stderr, "URL (not shown; it may be a key): want an http:// or https:// URL, such as http://127.0.0.1:3000")
		}
		return usageError(fs, stderr, "URL %q: want an http:// or https:// URL, such as http://127.0.0.1:3000", shownURL(pos[0]))
	}
	cfg.BaseURL = pos[0]
	cfg.Profile = conform.Profile(profile)
	if !slices.Contains(conform.Profiles, cfg.Profile) {
		names := strings.Split(conform.ProfileList(", "), ", ")
		return usageError(fs, stderr, "--profile %q: want %s or %s", profile, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
	}
	cfg.Notes = stderr
	if cfg.Body == conform.DefaultBody {
		cfg.Body = "" // keep the fixture defaults for the slow and invalid bodies
	}
	// Zero is no setting: the checker would read it as the default.
	if cfg.Timeout <= 0 {
		return usageError(fs, stderr, "--timeout %v: want a positive duration, the bound on each request", cfg.Timeout)
	}
	if cfg.Stagger <= 0 {
		return usageError(fs, stderr, "--stagger %v: want a positive duration, how long the slow request runs before its duplicates are sent", cfg.Stagger)
	}
	if len(cfg.APIKeys) == 0 {
		// Without a key every scenario would only see 401 unauthenticated.
		return usageError(fs, stderr, "--api-key KEY is required (the API's bearer key; 'idemkit dev' prints two)")
	}

	if len(cfg.APIKeys) > 1 && cfg.Profile != conform.ProfileOpenWOP {
		// Only the openwop profile checks a second tenant (tenant-isolation);
		// these profiles' scope scenarios take --scope-key.
		fmt.Fprintf(stderr, "idemkit conform: the %s profile checks one tenant: the second --api-key is not used (its scope scenarios take --scope-key PART=KEY)\n", cfg.Profile)
	}
	results, err := conform.Run(ctx, cfg)
	if errors.Is(err, conform.ErrUnreachable) {
		// Every scenario would fail on the same dial error: said once.
		fmt.Fprintf(stderr, "idemkit conform: %v\n", err)
		return 1
	}
	if errors.Is(err, conform.ErrInterrupted) {
		// Stopped by the user: the scenarios that ran are reported; the one
		// cut short and the rest are neither passed nor failed.
		conform.Write(stdout, results)
		fmt.Fprintf(stderr, "idemkit conform: %v\n", err)
		return 1
	}
	if err != nil {
		if !errors.Is(err, conform.ErrConfig) {
			// Not the flags' fault: a failure at run time.
			fmt.Fprintf(stderr, "idemkit conform: %v\n", err)
			return 1
		}
		return usageError(fs, stderr, "%s", conformSettingError(err))
	}
	_, failed := conform.Write(stdout, results)
	if failed > 0 && refusedEverywhere(results) {
		// Not the API's failure to read into the FAIL lines: the caller's
		// credential was refused throughout.
		fmt.Fprintln(stderr, "idemkit conform: every scenario failed on the API's refusal of the credential (401 or 403): "+
			"is --api-key a key this API accepts? ('idemkit dev' prints two; 'idemkit apikey create' mints one)")
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// refusedEverywhere reports whether every scenario that ran failed on a
// 401 or 403 answer (its detail names the status it got).
func refusedEverywhere(results []conform.Result) bool {
	ran := 0
	for _, r := range results {
		if r.Status == conform.Skip {
			continue
		}
		ran++
		if r.Status != conform.Fail || !strings.Contains(r.Detail, "got 401") && !strings.Contains(r.Detail, "got 403") {
			return false
		}
	}
	return ran > 0
}

// conformSettings name the flag of each setting the checker refuses, by
// the start of its refusal (RED_TEAM 416).
var conformSettings = []struct{ prefix, flag string }{
	{"the body ", "body"}, {"the slow body ", "slow-body"}, {"GET path ", "get"},
	{"route ", "route"}, {"other route ", "other-route"}, {"test route ", "test-route"}, {"retry route ", "retry-route"},
	{"profile ", "profile"}, {"scope part ", "scope-key"}, {"the scope key ", "scope-key"}, {"empty API key for scope part ", "scope-key"},
	{"at most two API keys", "api-key"}, {"the second API key ", "api-key"},
}

// conformSettingError says a configuration the checker refuses as every
// usage error is said, naming the flag ("--body: the body must be a JSON
// object"), not as "invalid setting: ..." (settingError), which left the
// operator to guess which of the command's bodies or routes it meant.
func conformSettingError(err error) string {
	msg := strings.TrimPrefix(settingError(err, conform.ErrConfig), "invalid setting: ")
	for _, s := range conformSettings {
		if strings.HasPrefix(msg, s.prefix) {
			return "--" + s.flag + ": " + msg
		}
	}
	return "invalid setting: " + msg
}
