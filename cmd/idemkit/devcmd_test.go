package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevAuthorizerTTLFlag: `idemkit dev -h` shows --authorizer-ttl
// defaulting to the deployed HTTP API's ReauthorizeEvery (5m), and a
// negative TTL is a usage error.
func TestDevAuthorizerTTLFlag(t *testing.T) {
	var usage bytes.Buffer
	if code := run(context.Background(), []string{"dev", "-h"}, &usage, io.Discard); code != 0 || !strings.Contains(usage.String(), "-authorizer-ttl") || !strings.Contains(usage.String(), "(default 5m0s)") {
		t.Fatalf("dev -h (exit %d) does not show --authorizer-ttl defaulting to 5m0s:\n%s", code, usage.String())
	}
	if code := run(context.Background(), []string{"dev", "--authorizer-ttl", "-1s"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("--authorizer-ttl -1s: exit %d, want 2", code)
	}
}

// TestDevAuthorizerTTL: `idemkit dev` keeps an authorizer decision for the
// template's ReauthorizeEvery by default, so a key removed from the
// api-keys table while dev runs is still granted (as deployed), and with
// --authorizer-ttl 0 the removal refuses the very next request.
func TestDevAuthorizerTTL(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("authttl%d-", time.Now().UnixNano())
	c := e.Client()
	table := prefix + "ApiKeysTable"
	for _, ttl := range []string{"", "0"} {
		args := []string{"--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", "idk_authttl_seed_0123456789=acme"}
		if ttl != "" {
			args = append(args, "--authorizer-ttl", ttl)
		}
		_, url := startDevInProcess(t, args...)
		key := apikeys.NewAPIKey()
		if err := (&apikeys.DynamoKeys{Client: c, Table: table}).PutKey(context.Background(), key, "acme"); err != nil {
			t.Fatal(err)
		}
		if code, m := devCall(t, "POST", url+"/runs", key, `{"workflowId":"conformance-noop"}`); code != 201 {
			t.Fatalf("ttl %q: a new key: %d %v", ttl, code, m)
		}
		if _, err := c.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: apikeys.HashKey(key)}}}); err != nil {
			t.Fatal(err)
		}
		code, m := devCall(t, "POST", url+"/runs", key, `{"workflowId":"conformance-noop"}`)
		if want := map[string]int{"": 201, "0": 401}[ttl]; code != want {
			t.Fatalf("--authorizer-ttl %q: the removed key got %d %v, want %d", ttl, code, m, want)
		}
	}
}

// TestDevTakenAddressSaysHowToPickAnother: when --addr is taken (another
// idemkit dev, another server) dev stops at once, before starting an
// engine, exits 1 and says in one line which address is taken and which
// flag picks another, also for make run.
func TestDevTakenAddressSaysHowToPickAnother(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"dev", "--addr", ln.Addr().String()}, &out, &errb)
	msg := errb.String()
	if code != 1 || !strings.Contains(msg, "address already in use") || !strings.Contains(msg, "--addr") || !strings.Contains(msg, "make run ARGS=") {
		t.Fatalf("exit %d, stderr %q: want 1 and a message naming --addr (and make run ARGS=)", code, msg)
	}
	// One line, naming the address; not the listener's own error before it.
	if lines := strings.Split(strings.TrimSuffix(msg, "\n"), "\n"); len(lines) != 1 || !strings.Contains(msg, ln.Addr().String()) ||
		strings.Contains(msg, "listen tcp") || strings.Contains(msg, "bind:") {
		t.Fatalf("stderr %q: want one line naming %s, without the listener's error", msg, ln.Addr())
	}
	if strings.Contains(msg, "started the DynamoDB engine") {
		t.Fatalf("an engine was started before the address was checked: %q", msg)
	}
}

// cancelOn is a log writer that cancels its context once the log holds
// the line it waits for: a signal arriving at that point of the start.
type cancelOn struct {
	mu     sync.Mutex
	log    strings.Builder
	line   string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.Write(b)
	if c.line != "" && strings.Contains(c.log.String(), c.line) {
		c.cancel()
	}
	return len(b), nil
}

func (c *cancelOn) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// TestDevInterruptedWhileStartingStopsQuietly: Ctrl-C (or SIGTERM) while
// `idemkit dev` is still starting stops it as it does once it serves:
// exit 0, everything it started stopped (the engine's process is gone),
// and one line saying it was interrupted, not an error that reads as a
// failure ("did not become ready: context canceled", the engine's own
// output, exit 1).
func TestDevInterruptedWhileStartingStopsQuietly(t *testing.T) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		testutil.Unavailable(t, "moto_server is not on PATH: %v", err)
	}
	const want = "idemkit dev: interrupted while starting; stopped what it had started"
	for _, at := range []string{"before the start", "dev: started the DynamoDB engine"} {
		t.Run(at, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			logs := &cancelOn{cancel: cancel}
			if at == "before the start" {
				cancel()
			} else {
				logs.line = at
			}
			var out bytes.Buffer
			code := run(ctx, []string{"dev", "--emulator", "moto", "--addr", testutil.FreeAddr(t), "--table-prefix", fmt.Sprintf("intr%d-", time.Now().UnixNano())}, &out, logs)
			var plain []string // the lines that are not the JSON log's
			for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if !strings.HasPrefix(l, "{") {
					plain = append(plain, l)
				}
			}
			if code != 0 || len(plain) != 1 || plain[0] != want || strings.Contains(out.String(), "serving") {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit 0 and one line %q beside the log", code, out.String(), logs.String(), want)
			}
			if m := regexp.MustCompile(`"pid":(\d+)`).FindStringSubmatch(logs.String()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Fatalf("the engine (pid %d) outlived the interrupted start: kill 0: %v", pid, err)
				}
			} else if at != "before the start" {
				t.Fatalf("no engine pid in the log:\n%s", logs.String())
			}
		})
	}
}

// TestDevStopLetsARequestInFlightFinish: Ctrl-C (or SIGTERM) while a
// request is in flight stops `idemkit dev` gracefully: the request gets
// its own answer (201, its run recorded), not a 499 saying the client
// closed it, and dev exits 0. Before, the stop cancelled every request
// at once, so the graceful shutdown's grace was never given.
func TestDevStopLetsARequestInFlightFinish(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	const key = "idk_stop_inflight_0123456789"
	addr := testutil.FreeAddr(t)
	out, w := newPipeOut()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("stop%d-", time.Now().UnixNano())
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"dev", "--addr", addr, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix,
			"--api-key", key + "=acme"}, w, io.Discard)
		w.Close()
	}()
	deadline := time.After(2 * time.Minute)
	waitServing(t, out, addr, code)
	url := "http://" + addr + "/runs"
	const body = `{"workflowId":"conformance-delay","inputs":{"delayMs":3000}}`
	ik := fmt.Sprintf("stop-inflight-%d", time.Now().UnixNano())
	type answer struct {
		code int
		m    map[string]any
	}
	first := make(chan answer, 1)
	go func() {
		resp, m := testutil.DoJSON(t, "POST", url, body, "Authorization", testutil.Bearer(key), "Idempotency-Key", ik)
		first <- answer{resp.StatusCode, m}
	}()
	// In flight: its claim is in the idempotency table (and nothing else
	// is: only this request was sent).
	for {
		o, err := e.Client().Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(prefix + "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Items) > 0 {
			break
		}
		select {
		case a := <-first:
			t.Fatalf("answered before it was seen in flight: %d %v", a.code, a.m)
		case <-deadline:
			t.Fatal("the request's claim never showed")
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel() // Ctrl-C
	select {
	case a := <-first:
		if a.code != 201 || !strings.HasPrefix(fmt.Sprint(a.m["runId"]), "acme/") {
			t.Fatalf("the request in flight at the stop got %d %v, want its 201", a.code, a.m)
		}
	case <-time.After(time.Minute):
		t.Fatal("the request in flight at the stop got no answer")
	}
	if c := <-code; c != 0 {
		t.Fatalf("idemkit dev exited %d after the stop", c)
	}
}

// TestDevStopAnswersAWaitingLongPoll: Ctrl-C (or SIGTERM) while a
// pollRunEvents request waits for an event of a live run ends its wait at
// once: the poll gets its 200 with no events (what it answers when its
// wait runs out) and dev exits 0 without waiting out its grace. Before, the
// poll kept waiting (13 s under dev's request timeout) past the stop's 10 s
// grace and was then cut without an answer, logged as a client that closed
// the request.
func TestDevStopAnswersAWaitingLongPoll(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	const key = "idk_stop_longpoll_0123456789"
	addr := testutil.FreeAddr(t)
	out, w := newPipeOut()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("poll%d-", time.Now().UnixNano())
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"dev", "--addr", addr, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix,
			"--api-key", key + "=acme"}, w, io.Discard)
		w.Close()
	}()
	waitServing(t, out, addr, code)
	// A run that stays live for a minute.
	resp, m := testutil.DoJSON(t, "POST", "http://"+addr+"/runs", `{"workflowId":"conformance-replay-side-effect","inputs":{"delayMs":60000}}`,
		"Authorization", testutil.Bearer(key), "Idempotency-Key", fmt.Sprintf("stop-longpoll-%d", time.Now().UnixNano()))
	if resp.StatusCode != 201 {
		t.Fatalf("createRun: %d %v", resp.StatusCode, m)
	}
	poll := "http://" + addr + "/runs/" + strings.Replace(fmt.Sprint(m["runId"]), "/", "~2F", 1) + "/events/poll?afterSequence=1000&timeout=60"
	type answer struct {
		code int
		body string
		err  error
	}
	polled := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", poll, nil)
		req.Header.Set("Authorization", testutil.Bearer(key))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		polled <- answer{resp.StatusCode, string(b), err}
	}()
	select { // it waits: no event follows sequence 1000
	case a := <-polled:
		t.Fatalf("the poll answered before the stop: %d %s %v", a.code, a.body, a.err)
	case <-time.After(1500 * time.Millisecond):
	}
	cancel() // Ctrl-C
	select {
	case a := <-polled:
		if a.err != nil || a.code != 200 || !strings.Contains(a.body, `"events":[]`) || !strings.Contains(a.body, `"isTerminal":false`) {
			t.Fatalf("the waiting poll at the stop got %d %q (%v), want its 200 with no events", a.code, a.body, a.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the poll waiting at the stop got no answer")
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("idemkit dev exited %d after the stop", c)
		}
	case <-time.After(time.Minute):
		t.Fatal("idemkit dev did not exit after the stop")
	}
}

// TestDevAddressItCannotListenOnIsSaidPlainly: an --addr of no interface
// of this machine (a TEST-NET address) stops dev before an engine starts,
// exit 1, in one line naming the flag and its value and what to give,
// not the listener's "listen tcp …: bind: …" alone.
func TestDevAddressItCannotListenOnIsSaidPlainly(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"dev", "--addr", "192.0.2.1:3000"}, &out, &errb)
	msg := errb.String()
	lines := strings.Split(strings.TrimSuffix(msg, "\n"), "\n")
	if code != 1 || len(lines) != 1 || !strings.HasPrefix(msg, "idemkit dev: --addr 192.0.2.1:3000: cannot listen there") ||
		!strings.Contains(msg, "an address of this machine") || strings.Contains(msg, "listen tcp") {
		t.Fatalf("exit %d, stderr %q: want 1 and one line naming --addr 192.0.2.1:3000 and what to give", code, msg)
	}
	if strings.Contains(msg, "started the DynamoDB engine") {
		t.Fatalf("an engine was started before the address was checked: %q", msg)
	}
}
