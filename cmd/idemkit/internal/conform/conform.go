package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Status is a scenario's verdict.
type Status string

// Verdicts.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP" // the scenario could not run (e.g. one API key for tenant-isolation)
)

// Result is the outcome of one scenario.
type Result struct {
	Scenario string
	Status   Status
	Detail   string

	// late: the verdict may only say that a duplicate reached the API
	// after the first request had finished, or that its answer reached the
	// checker late (a loaded machine), not how the API treats a duplicate
	// in flight; inWindow tries again with a new key.
	late bool
}

// Scenario is one black-box check.
type Scenario struct {
	Name    string
	Summary string
	run     func(ctx context.Context, e *env) Result
}

// Scenarios lists the checks of the OpenWOP default policy in the order
// Run runs them (ScenariosFor gives another profile's).
func Scenarios() []Scenario { return ScenariosFor(ProfileOpenWOP) }

// ScenariosFor lists the checks of profile p in the order Run runs them
// (nil for an unknown profile). Each one checks one rule of the policy.
func ScenariosFor(p Profile) []Scenario {
	switch p {
	case ProfileCommerce:
		return commerceScenarios()
	case ProfileERP:
		return erpScenarios()
	case ProfileOpenWOP:
		return openWOPScenarios()
	}
	return nil
}

func openWOPScenarios() []Scenario {
	return []Scenario{
		{"key-grammar", "keys inside the grammar are accepted, keys outside it get 400", keyGrammar},
		{"replay-marker", "a same-key repeat is the cached answer, byte-exact, with the replay marker", replayMarker},
		{"mismatch", "a different body under the same key gets 409 idempotency_key_mismatch, never the cached body", mismatch},
		{"in-flight", "a duplicate in flight gets 409 idempotency_in_flight with Retry-After, or waits for the winner's answer", inWindow(inFlight)},
		{"get-ignores-key", "GET does not honour Idempotency-Key", getIgnoresKey},
		{"tenant-isolation", "the same key under two tenants names two records", tenantIsolation},
		{"validation-not-cached", "a 400 validation_error is not cached", validationNotCached},
	}
}

// Run checks the API described by cfg, running every scenario in order, and
// returns one Result per scenario. The error is for an unusable cfg only; a
// scenario whose requests fail (connection refused, timeout) is a Fail.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	rc, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	advertised, err := reachable(ctx, rc.HTTP, rc.BaseURL, rc.Timeout)
	if err != nil {
		if ctx.Err() != nil {
			// Cut by the caller before the API answered: no scenario ran.
			n := len(ScenariosFor(rc.Profile))
			return nil, fmt.Errorf("%w: %d of %d scenarios not run", ErrInterrupted, n, n)
		}
		return nil, fmt.Errorf("%w %s: %w", ErrUnreachable, shownURL(rc.BaseURL), err)
	}
	if rc.Notes != nil && advertised != "" && advertised != string(rc.Profile) {
		fmt.Fprintf(rc.Notes, "idemkit conform: the API advertises the %s policy (GET /.well-known/openwop), not the %s policy this profile checks, "+
			"so its scenarios fail there by design: check an API that serves the %s policy (idemkit dev --policy %s; a deployed stack's IdempotencyPolicy), or run --profile %s\n",
			advertised, rc.Profile, rc.Profile, rc.Profile, advertised)
	}
	e := &env{cfg: rc, rules: rulesFor(rc.Profile)}
	var out []Result
	scenarios := ScenariosFor(rc.Profile)
	for i, s := range scenarios {
		r := s.run(ctx, e)
		if ctx.Err() != nil {
			// Cut by the caller: the scenario's verdict says nothing of
			// the API, which never got to answer it, nor do the ones after.
			return out, fmt.Errorf("%w: %d of %d scenarios not run", ErrInterrupted, len(scenarios)-i, len(scenarios))
		}
		r.Scenario = s.Name
		out = append(out, r)
	}
	return out, nil
}

// ErrInterrupted is matched by Run's error when its context ended before
// every scenario had run (the user stopped it): the results returned are
// the scenarios that ran to the end; the one cut short is not among them.
var ErrInterrupted = errors.New("interrupted")

// Write prints one line per result, "STATUS scenario: detail" (line breaks
// in a detail are folded into spaces), then the closing line
// "N passed, M failed", and returns the counts. Skipped scenarios count as
// neither.
func Write(w io.Writer, results []Result) (passed, failed int) {
	for _, r := range results {
		fmt.Fprintf(w, "%s %s: %s\n", r.Status, r.Scenario, strings.Join(strings.Fields(r.Detail), " "))
		switch r.Status {
		case Pass:
			passed++
		case Fail:
			failed++
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
	return passed, failed
}

func pass(format string, a ...any) Result {
	return Result{Status: Pass, Detail: fmt.Sprintf(format, a...)}
}

func fail(format string, a ...any) Result {
	return Result{Status: Fail, Detail: fmt.Sprintf(format, a...)}
}

func skip(format string, a ...any) Result {
	return Result{Status: Skip, Detail: fmt.Sprintf(format, a...)}
}

func failErr(err error) Result { return fail("request failed: %v", err) }

// windowTries is how many times inWindow runs a probe whose verdict needs
// a duplicate to reach the API while the first request runs.
const windowTries = 3

// late marks r as a verdict a late duplicate could explain (Result.late).
func late(r Result) Result {
	r.late = true
	return r
}

// inWindow runs probe, a scenario that sends a duplicate while a slow
// first request runs, up to windowTries times, each with a new key, while
// its verdict is one a late duplicate could explain: a duplicate sent while
// the first request ran can reach the API only after it finished, and its
// answer reach the checker only after the first one's, on a loaded machine
// (the first request's run is the in-flight window, not a bound on the
// time a request takes). It returns the first verdict that is not, else the
// last one, saying how many tries gave it: an API that holds every
// duplicate fails on every try.
func inWindow(probe func(ctx context.Context, e *env) Result) func(ctx context.Context, e *env) Result {
	return func(ctx context.Context, e *env) Result {
		var r Result
		for try := 1; try <= windowTries; try++ {
			if r = probe(ctx, e); !r.late || ctx.Err() != nil {
				if try > 1 {
					r.Detail += fmt.Sprintf(" (try %d: on the earlier ones a duplicate came late)", try)
				}
				r.late = false
				return r
			}
		}
		r.Detail += fmt.Sprintf(" (on each of %d tries, each with a new key)", windowTries)
		r.late = false
		return r
	}
}

// ErrUnreachable is matched by Run's error when the API does not answer
// HTTP at all (no connection, or no answer within Config.Timeout): every
// scenario would fail on the same error, so none is run.
var ErrUnreachable = errors.New("cannot reach")

// reachable reports whether the API at base answers HTTP at all (any
// status: only a failure to connect, or to get an answer within timeout,
// is an error), with one GET of its capabilities document, and returns the
// idempotency policy that document advertises
// (extensions["idemkit.idempotency"].policy, as an idemkit host does; ""
// when it names none or is not such a document).
func reachable(parent context.Context, c *http.Client, base string, timeout time.Duration) (policy string, err error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/.well-known/openwop", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded && parent.Err() == nil {
			// Connected, or still trying, and no answer within the bound.
			return "", fmt.Errorf("no answer to GET /.well-known/openwop within %v (--timeout)", timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			return "", ue.Err // the cause, without the method and URL Run names
		}
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		Extensions map[string]struct {
			Policy string `json:"policy"`
		} `json:"extensions"`
	}
	if resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc) == nil {
		policy = doc.Extensions[advertisedPolicyExtension].Policy
	}
	return policy, nil
}

// advertisedPolicyExtension is the discovery extension in which an idemkit
// host names its idempotency policy.
const advertisedPolicyExtension = "idemkit.idempotency"

// shownURL is the API's URL as a message prints it: a password given in
// it (http://user:PASS@host) replaced by "xxxxx" (RED_TEAM 434).
func shownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
