package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/tables"
	"github.com/idemkit/idemkit/internal/testutil"
)

// BenchmarkDevThroughput measures the dev stack (devstack.Start, what
// `idemkit dev` runs, in-process) with 32 concurrent clients each posting
// new-key runs (POST /runs, conformance-noop), against ceilings measured on
// the same engine process from the same 32 clients, on two engines: moto
// (which answers one request at a time, behind its serializing proxy) and
// AWS's DynamoDB Local (dev's default engine when java is on PATH).
//
// Five shapes are timed, each for devWindow, interleaved in two rounds, the
// second in reverse order (ABCDE, EDCBA), so that a change in the machine's
// load falls on all of them alike:
//   - dev: POST /runs through the stack (the executor's work left after the
//     window is drained before the next shape starts);
//   - pair: the exact call pair a new-key POST /runs makes the engine answer,
//     the Layer-1 claim PutItem and the completion TransactWriteItems (the
//     completed record and the run), replayed as dev sent them (bodies
//     captured by the counting proxy in a warm-up, with fresh keys) over
//     plain HTTP: the ceiling of a stack that keeps "the run exists if and
//     only if the 201 that names it was recorded";
//   - pair+exec: the same pair followed by the executor's two UpdateItems of
//     the run (pending → running → completed), sampled and replayed alike:
//     what a run costs the engine without the stream reads, the shard
//     discovery and the checkpoints that deliver it to the executor;
//   - raw-http: one conditional PutItem per request over the same plain HTTP;
//   - raw: one conditional PutItem per request through the Go SDK, the
//     goal's denominator.
//
// Reported per engine: runs/s, putitems/s and ratio (dev ÷ raw: the goal is
// at least one half), pairs/s, pair-ratio (pair ÷ raw: what the contract's
// two calls allow) and of-pair (dev ÷ pair), each also per round;
// runs/s-settled and ratio-settled (also per round), the dev window's runs
// over the time from the window's start until the executor's last
// transition of them was answered (the window rate counts a run at its
// 201, and the transitions the executor has not made by the window's end
// are made in the drain); the load average at the start of each round; the engine process's own CPU time
// (user and system, its whole process group) per unit of each shape
// (engine-cpu-ms/raw per PutItem, /pair per pair, /dev per run, its drain
// included; /dev-net without the engine's idle CPU over the drain), which
// bounds the rates where the engine is CPU-bound and moves less with other
// work on the machine than the rates do; the DynamoDB calls the dev stack
// made per run (API, executor and stream pollers, counted by a proxy
// between idemkit dev and the engine over the dev windows and their
// drains), also by table (PutItem@IdempotencyTable is the claim,
// PutItem@DevStreamCheckpoints a poller's checkpoint, GetRecords@RunsTable
// the executor's stream reads), the mean time the engine took to answer
// each operation, their
// product summed (engine-ms/run: on moto, reached one request at a time,
// 1000/engine-ms/run is the rate dev can sustain), and the pair's own mean
// times; the POSTs answered 503 with Retry-After per run (503/run: the store
// timed out, as a one-at-a-time engine can on a loaded machine; not counted
// as runs); and the calls per second while idle (before the load).
//
// With -cpuprofile, the profile's samples carry a "part" label (dev: the
// stack; proxy: the counting proxy; clients: the 32 clients of every shape),
// so `go tool pprof -tagfocus part=dev` shows dev's own CPU. Run: make
// bench-dev, or go test -run '^$' -bench DevThroughput -benchtime 1x ./e2e/
func BenchmarkDevThroughput(b *testing.B) {
	for _, kind := range []string{emulator.Moto, emulator.DynamoDBLocal} {
		b.Run(kind, func(b *testing.B) { devThroughput(b, kind) })
	}
}

// devWindow is how long each shape of BenchmarkDevThroughput is timed per
// round, and devClients how many clients send.
const (
	devWindow  = 8 * time.Second
	devClients = 32
)

func devThroughput(b *testing.B, kind string) {
	ctx := context.Background()
	srv, err := emulator.Start(ctx, kind, emulator.Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools"), SharedDB: true})
	if err != nil && strings.Contains(err.Error(), "not on PATH") {
		testutil.Unavailable(b, "%s: %v", kind, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	if _, err := os.Stat(shared.ModuleRoot()); err != nil {
		b.Fatal(err)
	}
	// The stack runs in this process (devstack.Start, what `idemkit dev`
	// runs), in front of a proxy that counts its calls to the engine, with
	// the CLI's defaults: the gateway keeps an authorizer decision for the
	// deployed ReauthorizeEvery, as `idemkit dev` and API Gateway do.
	var proxy *callCounter
	pprof.Do(ctx, pprof.Labels("part", "proxy"), func(context.Context) { proxy = newCallCounter(b, srv.Endpoint) })
	reauth, err := devstack.DeployedReauthorizeEvery()
	if err != nil {
		b.Fatal(err)
	}
	var stack *devstack.Stack
	pprof.Do(ctx, pprof.Labels("part", "dev"), func(ctx context.Context) {
		stack, err = devstack.Start(ctx, devstack.Options{Addr: "127.0.0.1:0", Endpoint: proxy.URL, APIKeys: []string{devKey + "=e2e-tenant"}, Getenv: os.Getenv,
			AuthorizerTTL: reauth})
	})
	if err != nil {
		b.Fatalf("the dev stack did not start: %v", err)
	}
	defer stack.Stop()
	url := stack.URL()

	// The same concurrency, the same engine: raw conditional PutItems.
	c := emulator.Client(srv.Endpoint)
	table := "raw-putitem"
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		b.Fatal(err)
	}
	// Every key is new: i counts from a new million in every timed window.
	var seq atomic.Int64
	run := func(window time.Duration, one func(worker int, i int64) error) float64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(window)
		calls := seq.Add(1) * 1e6
		start := time.Now()
		for w := 0; w < devClients; w++ {
			wg.Add(1)
			go pprof.Do(ctx, pprof.Labels("part", "clients"), func(context.Context) {
				defer wg.Done()
				for i := calls; time.Now().Before(deadline); i++ {
					if err := one(w, i); errors.Is(err, errUnavailable) {
						continue
					} else if err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: devClients}}
	nonce := time.Now().UnixNano()
	// Idle: what the stack asks of the engine with no request coming in (the
	// stream pollers' backoff, the parked-run schedule), after start-up.
	time.Sleep(5 * time.Second)
	idle0, idleT, idleCPU := proxy.total(), time.Now(), groupCPU(srv.PID())
	time.Sleep(10 * time.Second)
	idle := float64(proxy.total()-idle0) / time.Since(idleT).Seconds()
	// The engine's CPU per second of an idle stack (its own housekeeping
	// and the stack's idle polls), taken off a dev run's drain.
	idleCPUms := float64((groupCPU(srv.PID()) - idleCPU).Milliseconds()) / time.Since(idleT).Seconds()
	// drain lets the executor finish the runs just posted (its calls are
	// part of a run's cost): the stack is idle again when the count stops
	// moving.
	drain := func() {
		for last := int64(-1); ; {
			time.Sleep(2 * time.Second)
			if n := proxy.total(); n-last < int64(4*idle)+4 {
				return
			} else {
				last = n
			}
		}
	}
	var posted, unavailable atomic.Int64
	post := func(tag string) func(w int, i int64) error {
		return func(w int, i int64) error {
			req, _ := http.NewRequest("POST", url+"/runs", strings.NewReader(`{"workflowId":"conformance-noop","inputs":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", testutil.Bearer(devKey))
			req.Header.Set("Idempotency-Key", fmt.Sprintf("tp-%d-%s-%02d-%08d-0123456789", nonce, tag, w, i))
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
				// The store did not answer within its timeout (a
				// one-at-a-time engine under a loaded machine): counted
				// and reported, not a run.
				unavailable.Add(1)
				return errUnavailable
			}
			if resp.StatusCode != 201 {
				return fmt.Errorf("POST /runs: %d", resp.StatusCode)
			}
			posted.Add(1)
			return nil
		}
	}
	// Warm-up, not counted: the engine's first transactions, the clients'
	// connections, and the sample of the calls the proxy keeps (the
	// executor's, made after the POSTs, included).
	proxy.sampling.Store(true)
	run(2*time.Second, post("warm"))
	drain()
	proxy.sampling.Store(false)
	pair, err := proxy.pair()
	if err != nil {
		b.Fatal(err)
	}
	// The pair writes to tables of its own, created from template.yaml as
	// dev's are: no poller reads their streams, so no executor runs the
	// runs it creates.
	pairTables, err := tables.CreateAll(ctx, c, "pair-")
	if err != nil {
		b.Fatal(err)
	}
	if err := pair.retarget(pairTables); err != nil {
		b.Fatal(err)
	}
	if len(pair.exec) != 2 {
		b.Fatalf("the executor sent %d UpdateItems for the sampled run, not its two transitions", len(pair.exec))
	}
	pairTimes := &opTimes{}
	shapes := map[string]func(w int, i int64) error{
		"dev": post("dev"),
		"pair": func(w int, i int64) error {
			fresh := fmt.Sprintf("%d%02d%08d", nonce, w, i)
			return pair.send(ctx, hc, srv.Endpoint, fresh, false, pairTimes)
		},
		"pair+exec": func(w int, i int64) error {
			fresh := fmt.Sprintf("%d%02d%08d", nonce, w, i)
			return pair.send(ctx, hc, srv.Endpoint, fresh, true, nil)
		},
		"raw-http": func(w int, i int64) error {
			return rawPut(ctx, hc, srv.Endpoint, pair.auth, table, fmt.Sprintf("h-%d-%02d-%08d", nonce, w, i))
		},
		"raw": func(w int, i int64) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(table),
				Item: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%d-%02d-%08d", nonce, w, i)},
					"v":  &types.AttributeValueMemberS{Value: "x"},
				},
				ConditionExpression:      aws.String("attribute_not_exists(#k)"),
				ExpressionAttributeNames: map[string]string{"#k": "pk"},
			})
			return err
		},
	}
	run(time.Second, shapes["pair"])
	run(time.Second, shapes["pair+exec"])
	run(time.Second, shapes["raw-http"])
	run(time.Second, shapes["raw"])
	order := []string{"raw", "raw-http", "pair", "pair+exec", "dev"}
	rate := map[string][]float64{}
	// The engine's own CPU per unit of each shape (a dev run's includes
	// its drain): what bounds the rates when the engine is CPU-bound.
	cpuMs, units := map[string]float64{}, map[string]float64{}
	var drainIdle float64
	var settled []float64 // dev's runs per second until the executor had completed them, per round
	perRun, perTable := map[string]int64{}, map[string]int64{}
	posted.Store(0)
	unavailable.Store(0)
	b.ResetTimer()
	for r := 0; r < 2; r++ {
		b.ReportMetric(loadAverage(), fmt.Sprintf("load-r%d", r+1))
		for i := range order {
			name := order[i]
			if r == 1 {
				name = order[len(order)-1-i]
			}
			var before, beforeT map[string]int64
			var posted0 int64
			if name == "dev" {
				before, beforeT, posted0 = proxy.snapshot(), proxy.tableSnapshot(), posted.Load()
			}
			cpu0, t0 := groupCPU(srv.PID()), time.Now()
			rate[name] = append(rate[name], run(devWindow, shapes[name]))
			units[name] += rate[name][r] * time.Since(t0).Seconds()
			if name == "dev" {
				d0 := time.Now()
				drain()
				// Settled: the window's runs over the time until the
				// executor's last transition of them was answered.
				settled = append(settled, float64(posted.Load()-posted0)/proxy.lastAt("UpdateItem@RunsTable").Sub(t0).Seconds())
				drainIdle += idleCPUms * time.Since(d0).Seconds()
				for op, n := range proxy.since(before) {
					perRun[op] += n
				}
				for at, n := range proxy.tableSnapshot() {
					perTable[at] += n - beforeT[at]
				}
			}
			cpuMs[name] += float64((groupCPU(srv.PID()) - cpu0).Milliseconds())
		}
	}
	b.StopTimer()
	b.ReportMetric(loadAverage(), "load-end")
	mean := func(xs []float64) float64 { return (xs[0] + xs[1]) / 2 }
	runs, puts, pairs := mean(rate["dev"]), mean(rate["raw"]), mean(rate["pair"])
	b.ReportMetric(runs, "runs/s")
	b.ReportMetric(puts, "putitems/s")
	b.ReportMetric(pairs, "pairs/s")
	b.ReportMetric(mean(rate["raw-http"]), "http-putitems/s")
	b.ReportMetric(runs/puts, "ratio")
	b.ReportMetric(pairs/puts, "pair-ratio")
	b.ReportMetric(runs/pairs, "of-pair")
	b.ReportMetric(mean(rate["pair+exec"])/puts, "pair+exec-ratio")
	b.ReportMetric(mean(settled), "runs/s-settled")
	b.ReportMetric(mean(settled)/puts, "ratio-settled")
	for r := 0; r < 2; r++ {
		b.ReportMetric(rate["dev"][r]/rate["raw"][r], fmt.Sprintf("ratio-r%d", r+1))
		b.ReportMetric(settled[r]/rate["raw"][r], fmt.Sprintf("ratio-settled-r%d", r+1))
		b.ReportMetric(rate["pair"][r]/rate["raw"][r], fmt.Sprintf("pair-ratio-r%d", r+1))
		b.ReportMetric(rate["raw-http"][r]/rate["raw"][r], fmt.Sprintf("http-ratio-r%d", r+1))
	}
	for _, name := range order {
		b.ReportMetric(cpuMs[name]/units[name], "engine-cpu-ms/"+name)
	}
	b.ReportMetric((cpuMs["dev"]-drainIdle)/units["dev"], "engine-cpu-ms/dev-net")
	b.ReportMetric(idleCPUms, "engine-cpu-ms/s-idle")
	b.ReportMetric(idle, "idle-calls/s")
	var total int64
	var engine float64
	for op, n := range perRun {
		total += n
		engine += float64(n) * proxy.meanMs(op)
		b.ReportMetric(float64(n)/float64(posted.Load()), op+"/run")
		b.ReportMetric(proxy.meanMs(op), op+"-ms")
	}
	b.ReportMetric(float64(total)/float64(posted.Load()), "calls/run")
	for at, n := range perTable {
		if n > 0 {
			b.ReportMetric(float64(n)/float64(posted.Load()), at+"/run")
		}
	}
	b.ReportMetric(float64(unavailable.Load())/float64(posted.Load()), "503/run")
	b.ReportMetric(engine/float64(posted.Load()), "engine-ms/run")
	b.ReportMetric(pairTimes.meanMs(0), "pair-PutItem-ms")
	b.ReportMetric(pairTimes.meanMs(1), "pair-TransactWriteItems-ms")
	b.ReportMetric(0, "ns/op")
}

// groupCPU returns the user and system CPU time of the processes in process
// group pgid so far (0 where /proc cannot tell), in the kernel's 100 Hz
// clock ticks.
func groupCPU(pgid int) time.Duration {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, d := range dirs {
		bs, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session tty tpgid flags minflt
		// cminflt majflt cmajflt utime stime ...
		i := bytes.LastIndexByte(bs, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(bs[i+1:]))
		if len(f) < 13 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// errUnavailable marks a POST /runs answered 503 with Retry-After: no run,
// and no failure of the benchmark.
var errUnavailable = errors.New("503 with Retry-After")

// loadAverage returns the 1-minute load average (-1 where /proc has none).
func loadAverage() float64 {
	bs, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var v float64
	if _, err := fmt.Sscan(string(bs), &v); err != nil {
		return -1
	}
	return v
}

// callCounter is a reverse proxy in front of the engine counting DynamoDB
// (and DynamoDB Streams) calls by operation (X-Amz-Target).
type callCounter struct {
	*httptest.Server
	mu   sync.Mutex
	ops  map[string]int64
	busy map[string]time.Duration // summed time to answer, by operation
	// last is when the engine last answered a call, by operation and
	// table (as byTable).
	last map[string]time.Time
	// byTable counts calls by operation and table ("PutItem@IdempotencyTable":
	// the first table a call names, or whose stream it reads, less dev's
	// "idemkit-" prefix), which tells the claim from a checkpoint write.
	byTable map[string]int64
	// sampling, while set, keeps the request bodies of PutItem (the last
	// 256 before the first TransactWriteItems), of the first
	// TransactWriteItems, and of the UpdateItems that name the run it
	// created, for pair.
	sampling atomic.Bool
	puts     [][]byte
	twi      []byte
	header   http.Header
	updates  [][]byte
}

func newCallCounter(b *testing.B, target string) *callCounter {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	c := &callCounter{ops: map[string]int64{}, busy: map[string]time.Duration{}, byTable: map[string]int64{}, last: map[string]time.Time{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	// The proxy must not add cost of its own to dev's calls: net/http's
	// default transport keeps 2 idle connections per host, so with dev's
	// 32 clients and its executor calling at once almost every call
	// forwarded had the engine accept a new connection (the pair and raw
	// shapes, which do not pass the proxy, keep theirs).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	rp.Transport = tr
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target")
		if i := strings.LastIndexByte(op, '.'); i >= 0 {
			op = op[i+1:]
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		at := op + "@" + tableOf(body)
		if c.sampling.Load() && (op == "PutItem" || op == "TransactWriteItems" || op == "UpdateItem") {
			c.mu.Lock()
			if op == "PutItem" && c.twi == nil {
				c.puts = append(c.puts[max(0, len(c.puts)-255):], body)
			} else if op == "TransactWriteItems" && c.twi == nil {
				c.twi, c.header = body, r.Header.Clone()
			} else if op == "UpdateItem" && c.twi != nil {
				c.updates = append(c.updates, body)
			}
			c.mu.Unlock()
		}
		t0 := time.Now()
		rp.ServeHTTP(w, r)
		d := time.Since(t0)
		c.mu.Lock()
		c.ops[op]++
		c.busy[op] += d
		c.byTable[at]++
		c.last[at] = t0.Add(d)
		c.mu.Unlock()
	}))
	b.Cleanup(c.Close)
	return c
}

// lastAt is when the engine last answered a call at ("UpdateItem@RunsTable").
func (c *callCounter) lastAt(at string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[at]
}

func (c *callCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.ops))
	for k, v := range c.ops {
		m[k] = v
	}
	return m
}

func (c *callCounter) tableSnapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.byTable))
	for k, v := range c.byTable {
		m[k] = v
	}
	return m
}

// tableNamed and streamNamed match the table a DynamoDB or DynamoDB Streams
// request names: its (first) TableName, else the table in a stream ARN
// (StreamArn, or the ARN in a shard iterator where the engine puts one).
var (
	tableNamed  = regexp.MustCompile(`"TableName":"([^"]+)"`)
	streamNamed = regexp.MustCompile(`:table/([^/"]+)/stream`)
)

// tableOf returns the table body names, without dev's "idemkit-" prefix
// ("?" for none).
func tableOf(body []byte) string {
	m := tableNamed.FindSubmatch(body)
	if m == nil {
		m = streamNamed.FindSubmatch(body)
	}
	if m == nil {
		return "?"
	}
	return strings.TrimPrefix(string(m[1]), "idemkit-")
}

func (c *callCounter) since(before map[string]int64) map[string]int64 {
	now := c.snapshot()
	for k, v := range before {
		now[k] -= v
		if now[k] == 0 {
			delete(now, k)
		}
	}
	return now
}

// meanMs returns the mean time to answer one call of op, in ms.
func (c *callCounter) meanMs(op string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops[op] == 0 {
		return 0
	}
	return float64(c.busy[op].Microseconds()) / 1e3 / float64(c.ops[op])
}

func (c *callCounter) total() int64 {
	var n int64
	for _, v := range c.snapshot() {
		n += v
	}
	return n
}

// devPair is the call pair a new-key POST /runs made the engine answer, as
// sent: the claim PutItem and the completion TransactWriteItems, with the
// keys of the items they write.
type devPair struct {
	claim, twi []byte
	// exec are the executor's UpdateItems of the run the pair created
	// (pending → running → completed), in the order sent.
	exec  [][]byte
	keys  []string // the items' pk values, longest first
	auth  string   // the Authorization header dev sent
	token string   // the transaction's ClientRequestToken
}

// pair returns the call pair sampled while sampling was set: the first
// TransactWriteItems and the PutItem that claimed its record's key.
func (c *callCounter) pair() (*devPair, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.twi == nil {
		return nil, errors.New("no TransactWriteItems was sampled")
	}
	var tx struct {
		ClientRequestToken string
		TransactItems      []struct {
			Put *struct {
				Item struct {
					PK struct{ S string } `json:"pk"`
				}
			}
		}
	}
	if err := json.Unmarshal(c.twi, &tx); err != nil {
		return nil, err
	}
	p := &devPair{twi: c.twi, auth: c.header.Get("Authorization"), token: tx.ClientRequestToken}
	for _, it := range tx.TransactItems {
		if it.Put == nil || it.Put.Item.PK.S == "" {
			return nil, fmt.Errorf("the completion is not all Puts keyed by pk: %s", c.twi)
		}
		p.keys = append(p.keys, it.Put.Item.PK.S)
	}
	if len(p.keys) != 2 {
		return nil, fmt.Errorf("the completion writes %d items, not the record and the run", len(p.keys))
	}
	quoted, _ := json.Marshal(p.keys[0])
	for _, body := range c.puts {
		if bytes.Contains(body, quoted) {
			p.claim = body
		}
	}
	if p.claim == nil {
		return nil, fmt.Errorf("no claim PutItem of %s was sampled", p.keys[0])
	}
	run, _ := json.Marshal(p.keys[1])
	for _, body := range c.updates {
		if bytes.Contains(body, run) {
			p.exec = append(p.exec, body)
		}
	}
	sort.Slice(p.keys, func(i, j int) bool { return len(p.keys[i]) > len(p.keys[j]) })
	return p, nil
}

// retarget points the pair's calls at other tables: every table they name
// ends in a template.yaml logical ID (the longest that fits), and is
// replaced by names[ID].
func (p *devPair) retarget(names map[string]string) error {
	var claim struct{ TableName string }
	var tx struct {
		TransactItems []struct{ Put struct{ TableName string } }
	}
	if err := json.Unmarshal(p.claim, &claim); err != nil {
		return err
	}
	if err := json.Unmarshal(p.twi, &tx); err != nil {
		return err
	}
	used := []string{claim.TableName}
	for _, it := range tx.TransactItems {
		used = append(used, it.Put.TableName)
	}
	for _, name := range used {
		to, idLen := "", 0
		for id, n := range names {
			if strings.HasSuffix(name, id) && len(id) > idLen {
				to, idLen = n, len(id)
			}
		}
		if to == "" {
			return fmt.Errorf("table %q is none of template.yaml's", name)
		}
		from, _ := json.Marshal(name)
		quoted, _ := json.Marshal(to)
		p.claim, p.twi = bytes.ReplaceAll(p.claim, from, quoted), bytes.ReplaceAll(p.twi, from, quoted)
		for i := range p.exec {
			p.exec[i] = bytes.ReplaceAll(p.exec[i], from, quoted)
		}
	}
	return nil
}

// send replays the pair (with exec, the executor's UpdateItems after it)
// at endpoint with every item key made unique by fresh, and records each
// call's time to answer in t.
func (p *devPair) send(ctx context.Context, hc *http.Client, endpoint, fresh string, exec bool, t *opTimes) error {
	claim, twi := p.claim, p.twi
	var ups [][]byte
	if exec {
		ups = append(ups, p.exec...)
	}
	for i, k := range p.keys {
		from, _ := json.Marshal(k)
		to, _ := json.Marshal(fmt.Sprintf("%s~%d~%s", k, i, fresh))
		claim, twi = bytes.ReplaceAll(claim, from, to), bytes.ReplaceAll(twi, from, to)
		for j := range ups {
			ups[j] = bytes.ReplaceAll(ups[j], from, to)
		}
	}
	if p.token != "" {
		// A new transaction: the engine answers a token it has seen
		// within ten minutes with the first call's outcome (or refuses
		// one with other items).
		from, _ := json.Marshal(p.token)
		to, _ := json.Marshal(fresh)
		twi = bytes.ReplaceAll(twi, from, to)
	}
	for i, call := range []struct {
		op   string
		body []byte
	}{{"PutItem", claim}, {"TransactWriteItems", twi}} {
		t0 := time.Now()
		if err := sendRaw(ctx, hc, endpoint, p.auth, call.op, call.body); err != nil {
			return err
		}
		if t != nil {
			t.add(i, time.Since(t0))
		}
	}
	for _, body := range ups {
		if err := sendRaw(ctx, hc, endpoint, p.auth, "UpdateItem", body); err != nil {
			return err
		}
	}
	return nil
}

// rawPut sends one conditional PutItem of a new two-attribute item over
// plain HTTP, as devPair.send sends its calls.
func rawPut(ctx context.Context, hc *http.Client, endpoint, auth, table, pk string) error {
	body := fmt.Sprintf(`{"TableName":%q,"Item":{"pk":{"S":%q},"v":{"S":"x"}},"ConditionExpression":"attribute_not_exists(#k)","ExpressionAttributeNames":{"#k":"pk"}}`, table, pk)
	return sendRaw(ctx, hc, endpoint, auth, "PutItem", []byte(body))
}

// sendRaw posts one DynamoDB call (the emulators do not check signatures).
func sendRaw(ctx context.Context, hc *http.Client, endpoint, auth, op string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
	req.Header.Set("Authorization", auth)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", op, resp.StatusCode, out)
	}
	return nil
}

// opTimes sums the time to answer of two call kinds.
type opTimes struct {
	mu  sync.Mutex
	n   [2]int64
	sum [2]time.Duration
}

func (t *opTimes) add(i int, d time.Duration) {
	t.mu.Lock()
	t.n[i]++
	t.sum[i] += d
	t.mu.Unlock()
}

func (t *opTimes) meanMs(i int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[i] == 0 {
		return 0
	}
	return float64(t.sum[i].Microseconds()) / 1e3 / float64(t.n[i])
}
