package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

var coldRounds = flag.Int("cold.rounds", 12, "cold starts of each function per benchmark iteration (BenchmarkColdStartUnderRIE)")

// coldFn is one bootstrap the cold-start benchmarks start under the RIE,
// and the cheapest event it answers: the first answered invocation measures
// start-up and dispatch, not a DynamoDB round trip.
type coldFn struct {
	name, pkg, event, want string
	boot                   string // the built binary
}

func coldFns() []*coldFn {
	capabilities := `{"version":"2.0","routeKey":"GET /.well-known/openwop","rawPath":"/.well-known/openwop",` +
		`"headers":{},"requestContext":{"domainName":"api.example.com","requestId":"cold","http":{"method":"GET","path":"/.well-known/openwop"}}}`
	return []*coldFn{
		// The reference: a bare aws-lambda-go handler, built the same way.
		{name: "bare", pkg: "e2e/testdata/barelambda", event: `{}`, want: `{}`},
		// The discovery document: no credential, no table read.
		{name: "api", pkg: "functions/api", event: capabilities, want: `"statusCode":200`},
		// An empty stream batch.
		{name: "executor", pkg: "functions/executor", event: `{"Records":[]}`, want: `batchItemFailures`},
		// A request without a bearer key: answered Unauthorized before the
		// key store is asked.
		{name: "authorizer", pkg: "functions/authorizer", event: `{"version":"2.0","type":"REQUEST","headers":{}}`, want: `Unauthorized`},
	}
}

// coldEnv builds the functions (host architecture, release flags) and
// returns the environment they run with: what Lambda's provided.al2023
// sets (and nothing of this machine's: a variable such as AWS_CA_BUNDLE
// makes loading the AWS config parse a certificate bundle, which no
// function on Lambda does), static credentials, moto's endpoint and tables.
func coldEnv(b testing.TB, fns []*coldFn) []string {
	e := dynamotest.Start(b, dynamotest.Moto)
	dir := b.TempDir()
	for _, f := range fns {
		f.boot = buildHost(b, dir, f.name, f.pkg)
	}
	return []string{
		"PATH=/usr/local/bin:/usr/bin/:/bin", "LANG=en_US.UTF-8", "TZ=:UTC",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_ACCESS_KEY_ID=idemkit", "AWS_SECRET_ACCESS_KEY=idemkit", "AWS_SESSION_TOKEN=idemkit",
		"AWS_REGION=" + e.Region, "AWS_DEFAULT_REGION=" + e.Region,
		"DYNAMODB_ENDPOINT=" + e.Endpoint,
		"IDEMPOTENCY_TABLE=" + e.CreateTable(b, "IdempotencyTable"),
		"RUNS_TABLE=" + e.CreateTable(b, "RunsTable"),
		"EFFECTS_TABLE=" + e.CreateTable(b, "EffectsTable"),
		"API_KEYS_TABLE=" + e.CreateTable(b, "ApiKeysTable"),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
	}
}

// coldStart starts f under the RIE and returns the time from starting the
// RIE to the answer of the first invocation, with when the RIE was started
// and the process's output.
// The invocation is sent as soon as the RIE listens (a refused connection
// is retried at once) and blocks until the runtime, initialised, answers.
func coldStart(b testing.TB, rie string, env []string, f *coldFn, then ...func(invoke func(event string) string)) (time.Time, time.Duration, string) {
	b.Helper()
	ports := testutil.FreeAddrs(b, 2)
	addr, apiAddr := ports[0], ports[1]
	url := "http://" + addr + "/2015-03-31/functions/function/invocations"
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", apiAddr, "--log-level", "error", f.boot)
	cmd.Env = env
	started := time.Now()
	p := testutil.Start(b, cmd, 5*time.Second)
	defer p.Stop()
	deadline := started.Add(2 * time.Minute) // a hang guard: the loop ends at the first answer
	for {
		resp, err := client.Post(url, "application/json", strings.NewReader(f.event))
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(started)
			if rerr != nil || !bytes.Contains(body, []byte(f.want)) {
				b.Fatalf("%s: first invocation: HTTP %d %s (%v)", f.name, resp.StatusCode, body, rerr)
			}
			for _, next := range then {
				next(func(event string) string {
					r, err := client.Post(url, "application/json", strings.NewReader(event))
					if err != nil {
						b.Fatalf("%s: invoke: %v", f.name, err)
					}
					defer r.Body.Close()
					out, _ := io.ReadAll(r.Body)
					return string(out)
				})
			}
			// The RIE forwards the function's stderr on its own time: a
			// traced start waits for the last mark to arrive.
			for traced(env) && !strings.Contains(p.Log.String(), "idemkit-init-trace wiring") && time.Since(started) < 30*time.Second {
				time.Sleep(time.Millisecond)
			}
			return started, took, p.Log.String()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || p.Exited() || time.Now().After(deadline) {
			b.Fatalf("%s did not answer under the RIE: %v\n%s", f.name, err, p.Log.String())
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// TestFunctionsAnswerTheirFirstInvocationUnderRIE: with the start-up work
// deferred to first use (the identifier matchers, the log-hash salt) each
// function, built for release and started under the RIE in a Lambda-like
// environment, answers its first invocation; the authorizer, wired from
// the start-up package alone, then reads its table: an unknown key is
// Unauthorized, not a key-store failure.
func TestFunctionsAnswerTheirFirstInvocationUnderRIE(t *testing.T) {
	rie := rieBinary(t)
	fns := coldFns()
	env := coldEnv(t, fns)
	for _, f := range fns {
		var then []func(func(string) string)
		if f.name == "authorizer" {
			then = append(then, func(invoke func(string) string) {
				out := invoke(`{"version":"2.0","type":"REQUEST","headers":{"authorization":"Bearer unknown-key-0123456789"}}`)
				if !strings.Contains(out, "Unauthorized") || strings.Contains(out, "unavailable") {
					t.Fatalf("authorizer, unknown key: %s", out)
				}
			})
		}
		if f.name == "api" {
			then = append(then, func(invoke func(string) string) {
				// A client mistake after the cold start: the envelope, not a 500.
				out := invoke(`{"version":"2.0","routeKey":"POST /runs","rawPath":"/runs","body":"{","headers":{"content-type":"application/json","idempotency-key":"cold-0123456789abcdef0123"},` +
					`"requestContext":{"domainName":"api.example.com","requestId":"cold-2","authorizer":{"lambda":{"tenantId":"acme"}},"http":{"method":"POST","path":"/runs"}}}`)
				if !strings.Contains(out, `"statusCode":400`) {
					t.Fatalf("api, malformed body: %s", out)
				}
			})
		}
		coldStart(t, rie, env, f, then...)
	}
}

func traced(env []string) bool {
	for _, v := range env {
		if v == "IDEMKIT_INIT_TRACE=1" {
			return true
		}
	}
	return false
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkColdStartUnderRIE measures each function's cold start under the
// pinned Lambda RIE the way Lambda pays it: from starting the RIE to the
// answer of the first invocation (the RIE's own start, process start, Go
// runtime and package init, AWS config, client construction, wiring, the
// first request). In one run it alternates the api, executor and
// authorizer functions with a bare aws-lambda-go handler built the same
// way, -cold.rounds cold starts of each (the order reversed every other
// round), and reports each one's median and its ratio to the bare
// handler's median (make bench-cold).
func BenchmarkColdStartUnderRIE(b *testing.B) {
	rie := rieBinary(b)
	fns := coldFns()
	env := coldEnv(b, fns)
	samples := map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < *coldRounds; r++ {
			order := append([]*coldFn(nil), fns...)
			if r%2 == 1 {
				for a, z := 0, len(order)-1; a < z; a, z = a+1, z-1 {
					order[a], order[z] = order[z], order[a]
				}
			}
			for _, f := range order {
				_, d, _ := coldStart(b, rie, env, f)
				samples[f.name] = append(samples[f.name], d)
			}
		}
	}
	bare := median(samples["bare"])
	for _, f := range fns {
		m := median(samples[f.name])
		b.ReportMetric(ms(m), f.name+"-ms")
		if f.name != "bare" {
			b.ReportMetric(float64(m)/float64(bare), f.name+"-x-bare")
		}
	}
}

// initPhases are the init trace's phases in order (boot.EnvInitTrace).
var initPhases = []string{"main", "settings", "aws-config", "sdk-client", "wiring"}

// coldSplit is one traced cold start, split: from starting the RIE to the
// start of the function's Go runtime (the RIE's own start, fork and exec),
// the package inits (idemkit's, the AWS SDK's, the rest: the standard
// library and aws-lambda-go), the runtime's own time up to main (its init,
// and the binary's pages faulting in between the package inits), each
// phase of main, and the runtime loop up to the first answer.
type coldSplit map[string]time.Duration

// parseSplit reads the GODEBUG=inittrace=1 lines ("init pkg @T ms, D ms
// clock, ...", T since that process's runtime started) and the init trace
// lines ("idemkit-init-trace phase unixnano") of one cold start. The RIE,
// a Go program too, prints its own inits first; every Go binary's first
// init is internal/bytealg, so the function's are those after the last one.
func parseSplit(log string, started time.Time, total time.Duration) (coldSplit, error) {
	var s coldSplit
	marks := map[string]time.Time{}
	var lastEnd float64
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 6 && f[0] == "init" && strings.HasPrefix(f[2], "@"):
			at, err1 := strconv.ParseFloat(strings.TrimPrefix(f[2], "@"), 64)
			d, err2 := strconv.ParseFloat(f[4], 64)
			if err1 != nil || err2 != nil {
				continue
			}
			if f[1] == "internal/bytealg" {
				s, lastEnd = coldSplit{}, 0
			}
			if s == nil {
				continue
			}
			lastEnd = max(lastEnd, at+d)
			group := "init-other"
			switch {
			case strings.HasPrefix(f[1], "github.com/idemkit/"):
				group = "init-idemkit"
			case strings.HasPrefix(f[1], "github.com/aws/aws-sdk-go-v2"), strings.HasPrefix(f[1], "github.com/aws/smithy-go"):
				group = "init-aws-sdk"
			}
			s[group] += msDur(d)
		case len(f) == 3 && f[0] == "idemkit-init-trace":
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err == nil {
				marks[f[1]] = time.Unix(0, n)
			}
		}
	}
	if s == nil || marks["main"].IsZero() || marks["wiring"].IsZero() {
		return nil, fmt.Errorf("no init trace in the output:\n%s", log)
	}
	runtimeStart := marks["main"].Add(-msDur(lastEnd))
	s["rie-and-exec"] = runtimeStart.Sub(started)
	s["runtime"] = msDur(lastEnd) - s["init-idemkit"] - s["init-aws-sdk"] - s["init-other"]
	prev := marks["main"]
	for _, ph := range initPhases[1:] {
		if t, ok := marks[ph]; ok {
			s[ph] = t.Sub(prev)
			prev = t
		}
	}
	s["first-invoke"] = started.Add(total).Sub(prev)
	return s, nil
}

func msDur(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// BenchmarkColdStartSplitUnderRIE splits the cold start of the api,
// executor and authorizer functions (and the bare handler's, up to main)
// into where the time goes: each started -cold.rounds times under the RIE
// with GODEBUG=inittrace=1 and IDEMKIT_INIT_TRACE=1, the median of each
// phase reported in ms as <function>-<phase>-ms (make bench-cold). The
// traces cost a few writes to stderr, so these cold starts are a little
// slower than BenchmarkColdStartUnderRIE's.
func BenchmarkColdStartSplitUnderRIE(b *testing.B) {
	rie := rieBinary(b)
	fns := coldFns()
	env := append(coldEnv(b, fns), "GODEBUG=inittrace=1", "IDEMKIT_INIT_TRACE=1")
	splits := map[string]map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < *coldRounds; r++ {
			for _, f := range fns {
				if f.name == "bare" {
					continue
				}
				started, d, log := coldStart(b, rie, env, f)
				s, err := parseSplit(log, started, d)
				if err != nil {
					b.Fatalf("%s: %v", f.name, err)
				}
				if splits[f.name] == nil {
					splits[f.name] = map[string][]time.Duration{}
				}
				s["total"] = d
				for k, v := range s {
					splits[f.name][k] = append(splits[f.name][k], v)
				}
			}
		}
	}
	for _, f := range fns {
		for k, v := range splits[f.name] {
			b.ReportMetric(ms(median(v)), f.name+"-"+k+"-ms")
		}
	}
}
