package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/internal/testutil"
)

// conformDevKeys are the two tenants' API keys seeded into `idemkit dev`.
var conformDevKeys = [2]string{"idk_conform_tenant_a_7f3c2a06675918f9", "idk_conform_tenant_b_296117235d21ce4a"}

// conformStartDev builds ./cmd/idemkit and starts `idemkit dev` on a free loopback
// port with two tenants' API keys; it waits until GET /.well-known/openwop
// answers 200 and stops the process group (SIGTERM, then SIGKILL after 30 s)
// at cleanup. Where it cannot run, the test skips, or fails under CI=true.
func conformStartDev(t *testing.T) string {
	t.Helper()
	bin, err := testutil.Build(t.TempDir(), "idemkit", "cmd/idemkit", nil, nil)
	if err != nil {
		testutil.Unavailable(t, "idemkit dev is not available: %v", err)
	}
	addr := testutil.FreeAddr(t)
	p := testutil.Start(t, exec.Command(bin, "dev", "--addr", addr,
		"--api-key", conformDevKeys[0]+"=conform-tenant-a", "--api-key", conformDevKeys[1]+"=conform-tenant-b"), 30*time.Second)
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := testutil.WaitHTTP(ctx, url+"/.well-known/openwop", p.Done()); err != nil {
		testutil.Unavailable(t, "idemkit dev is not available: %v\n%s", err, p.Log.String())
	}
	return url
}

// TestConformAndClientAgainstIdemkitDev runs both callers' pieces against a real
// `idemkit dev`: `idemkit conform` with its defaults and two tenants (the CI
// run of the checker), and the client package.
func TestConformAndClientAgainstIdemkitDev(t *testing.T) {
	url := conformStartDev(t)
	t.Run("conform", func(t *testing.T) { conformAgainstDev(t, url) })
	t.Run("client", func(t *testing.T) { clientAgainstDev(t, url) })
}

// conformInFlightLine matches the in-flight scenario's PASS line.
var conformInFlightLine = regexp.MustCompile(`(?m)^PASS in-flight: (\d+) duplicate\(s\) in flight: (\d+) got 409 with Retry-After, (\d+) waited for the winner's answer; ran once( \(try \d: on the earlier ones a duplicate came late\))?$`)

// conformAgainstDev is the CI run of the checker: `idemkit conform` with its
// defaults and two tenants passes all seven scenarios. The in-flight scenario
// must have run (it SKIPs when no duplicate overlapped the first request):
// with its defaults, the conformance-delay fixture holds the first request
// long enough, and idemkit dev's duplicates wait (bounded) for the winner.
// A second run with a first request (10 s) far slower than the server's wait
// bound (a dev of its own with --idempotency-wait 1s) checks the other branch:
// the duplicates get 409 idempotency_in_flight with Retry-After. The 9 s
// between the two is the margin a loaded machine has to get the duplicates
// there (the default 5 s wait and an 8 s body left 3 s, which a loaded
// machine once used up: every duplicate waited for the winner instead).
func conformAgainstDev(t *testing.T, url string) {
	run := func(t *testing.T, want string, args ...string) (dups, got409, waited int) {
		t.Helper()
		url := url
		if len(args) > 0 && strings.HasPrefix(args[0], "http://") {
			url, args = args[0], args[1:]
		}
		var out, errOut bytes.Buffer
		code := runConform(context.Background(), append(args, url), &out, &errOut)
		t.Logf("idemkit conform %s:\n%s%s", strings.Join(append(args, url), " "), out.String(), errOut.String())
		if code != 0 || conformLastLine(out.String()) != want {
			t.Fatalf("exit %d, want 0 and %q\n%s", code, want, errOut.String())
		}
		m := conformInFlightLine.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("the in-flight scenario did not PASS (skipped: no overlap?)")
		}
		dups, _ = strconv.Atoi(m[1])
		got409, _ = strconv.Atoi(m[2])
		waited, _ = strconv.Atoi(m[3])
		if dups < 1 || got409+waited != dups {
			t.Fatalf("in-flight: %d duplicates in flight, %d got 409, %d waited", dups, got409, waited)
		}
		return dups, got409, waited
	}
	t.Run("defaults", func(t *testing.T) {
		run(t, "7 passed, 0 failed", "--api-key", conformDevKeys[0], "--api-key", conformDevKeys[1])
	})
	t.Run("in-flight 409", func(t *testing.T) {
		e := dynamotest.Start(t, dynamotest.Moto)
		_, short := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("cwait%d-", time.Now().UnixNano()),
			"--api-key", conformDevKeys[0]+"=conform-tenant-a", "--idempotency-wait", "1s")
		_, got409, _ := run(t, "6 passed, 0 failed", short, "--api-key", conformDevKeys[0],
			"--slow-body", `{"workflowId":"conformance-delay","inputs":{"delayMs":10000}}`)
		if got409 == 0 {
			t.Fatal("no duplicate got 409 idempotency_in_flight although the first request outlasted the server's wait")
		}
	})
}

func conformDevPost(ctx context.Context, c *client.Client, url, body string) (*client.Response, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/runs", strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+conformDevKeys[0])
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp, m, nil
}

func conformMustPost(t *testing.T, ctx context.Context, c *client.Client, url, body string) (*client.Response, map[string]any) {
	t.Helper()
	r, m, err := conformDevPost(ctx, c, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return r, m
}

// clientAgainstDev drives the client package against the real dev server: a
// derived key reused by a second "process" is replayed, a 503 is retried up
// to the bound, and a duplicate of a request in flight ends with the winner's
// run.
func clientAgainstDev(t *testing.T, url string) {
	c, err := client.New(client.Config{BaseDelay: 50 * time.Millisecond, MaxDelay: 500 * time.Millisecond, MaxAttempts: 20, MaxElapsed: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("derived key replayed", func(t *testing.T) {
		ctx := client.WithKey(context.Background(), client.DeriveKey("conform-dev-test", client.NewKey()))
		r1, m1 := conformMustPost(t, ctx, c, url, `{"workflowId":"conformance-noop","inputs":{}}`)
		r2, m2 := conformMustPost(t, ctx, c, url, `{"workflowId":"conformance-noop","inputs":{}}`)
		if r1.StatusCode != 201 || r2.StatusCode != 201 || m1["runId"] == nil || m1["runId"] != m2["runId"] {
			t.Fatalf("%d %v / %d %v", r1.StatusCode, m1, r2.StatusCode, m2)
		}
		if r1.Replayed || !r2.Replayed || r1.Attempts != 1 || r2.Attempts != 1 {
			t.Fatalf("first %+v second %+v", r1.Result, r2.Result)
		}
	})

	t.Run("503 retried to the bound", func(t *testing.T) {
		c3, _ := client.New(client.Config{BaseDelay: 10 * time.Millisecond, MaxAttempts: 3})
		r, _ := conformMustPost(t, context.Background(), c3, url, `{"workflowId":"conformance-unavailable","inputs":{}}`)
		if r.StatusCode != 503 || r.Attempts != 3 || r.Replayed {
			t.Fatalf("status %d %+v", r.StatusCode, r.Result)
		}
	})

	// The first request answers after 8 s, longer than the server holds a
	// duplicate (1 s here, so the duplicate has 7 s to get there on a
	// loaded machine): the duplicate gets 409 in flight with a short
	// Retry-After (the first request's owner is alive), polls again within
	// the client's default budget and receives the first request's answer.
	// The seams' idempotency hold (a dev with --conformance-seams) keeps
	// whichever of the two same-key creates claims first in flight for the
	// 8 s; both are sent at once, so which one wins is decided by the
	// server, not by a sleep, and the checks hold for either.
	t.Run("first request answers after 8 s within the default budget", func(t *testing.T) {
		c1, err := client.New(client.Config{})
		if err != nil {
			t.Fatal(err)
		}
		e := dynamotest.Start(t, dynamotest.Moto)
		_, hurl := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("chold%d-", time.Now().UnixNano()),
			"--api-key", conformDevKeys[0]+"=conform-tenant-a", "--conformance-seams", "--idempotency-wait", "1s")
		key := client.NewKey()
		if r, _ := testutil.DoJSON(t, "POST", hurl+"/conformance/seams/sample/test/idempotency/hold", fmt.Sprintf(`{"key":%q,"holdMs":8000}`, key),
			"Authorization", testutil.Bearer(conformDevKeys[0])); r.StatusCode != 200 {
			t.Fatalf("hold: %d", r.StatusCode)
		}
		ctx := client.WithKey(context.Background(), key)
		type res struct {
			r   *client.Response
			m   map[string]any
			err error
		}
		both := make(chan res, 2)
		for range 2 {
			go func() {
				r, m, err := conformDevPost(ctx, c1, hurl, `{"workflowId":"conformance-noop","inputs":{}}`)
				both <- res{r, m, err}
			}()
		}
		f, d := <-both, <-both
		if f.err != nil || d.err != nil {
			t.Fatalf("errors: %v / %v", f.err, d.err)
		}
		if f.r.Replayed {
			f, d = d, f
		}
		if f.r.StatusCode != 201 || f.r.Replayed || f.r.Attempts != 1 {
			t.Fatalf("first: %+v", f.r)
		}
		if d.r.StatusCode != 201 || !d.r.Replayed || d.m["runId"] == nil || d.m["runId"] != f.m["runId"] || d.r.Attempts < 2 {
			t.Fatalf("duplicate: %d %v %+v (first %v)", d.r.StatusCode, d.m, d.r.Result, f.m)
		}
	})

	t.Run("duplicate in flight", func(t *testing.T) {
		key := client.NewKey()
		ctx := client.WithKey(context.Background(), key)
		body := `{"workflowId":"conformance-delay","inputs":{"delayMs":1500}}`
		type res struct {
			r   *client.Response
			m   map[string]any
			err error
		}
		first := make(chan res, 1)
		go func() {
			r, m, err := conformDevPost(ctx, c, url, body)
			first <- res{r, m, err}
		}()
		time.Sleep(300 * time.Millisecond)
		r2, m2, err := conformDevPost(ctx, c, url, body)
		f := <-first
		if err != nil || f.err != nil {
			t.Fatalf("errors: %v / %v", f.err, err)
		}
		if f.r.StatusCode != 201 || r2.StatusCode != 201 || f.m["runId"] != m2["runId"] {
			t.Fatalf("first %d %v, duplicate %d %v", f.r.StatusCode, f.m, r2.StatusCode, m2)
		}
		// One of them ran, the other got the winner's answer (after 409s with
		// Retry-After, or a server-side wait).
		if f.r.Replayed == r2.Replayed {
			t.Fatalf("first %+v duplicate %+v: want exactly one replay", f.r.Result, r2.Result)
		}
	})
}
