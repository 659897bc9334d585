package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
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
	"github.com/idemkit/idemkit/internal/testutil"
)

// BenchmarkDevThroughput measures the dev stack (devstack.Start, what
// `idemkit dev` runs, in-process) with 32 concurrent clients each posting
// new-key runs (POST /runs, conformance-noop) for 10 s, and, on the same
// engine process, the raw rate of conditional PutItems from 32
// concurrent clients, on two engines: moto (which answers one request at a
// time, behind its serializing proxy) and AWS's DynamoDB Local (dev's
// default engine when java is on PATH). Reported per engine: runs/s,
// putitems/s and their ratio (the goal is at least one half); the DynamoDB
// calls the dev stack makes per run (API, executor and stream pollers,
// counted by a proxy between idemkit dev and the engine, over the load
// window and the drain after it), the mean time the engine took to answer
// each operation, their product summed over the operations (engine-ms/run:
// the engine time one run costs, executor included; on moto, reached one
// request at a time, 1000/engine-ms/run is the rate dev can sustain, while
// runs/s, counted over the load window alone, may exceed it by the executor
// work left for the drain), and the calls per second while idle (before the
// load). Run: make bench-dev, or
// go test -run '^$' -bench DevThroughput -benchtime 1x ./e2e/
func BenchmarkDevThroughput(b *testing.B) {
	for _, kind := range []string{emulator.Moto, emulator.DynamoDBLocal} {
		b.Run(kind, func(b *testing.B) { devThroughput(b, kind) })
	}
}

func devThroughput(b *testing.B, kind string) {
	const clients, window = 32, 10 * time.Second
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
	proxy := newCallCounter(b, srv.Endpoint)
	reauth, err := devstack.DeployedReauthorizeEvery()
	if err != nil {
		b.Fatal(err)
	}
	stack, err := devstack.Start(ctx, devstack.Options{Addr: "127.0.0.1:0", Endpoint: proxy.URL, APIKeys: []string{devKey + "=e2e-tenant"}, Getenv: os.Getenv,
		AuthorizerTTL: reauth})
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
	run := func(one func(worker, i int) error) float64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(window)
		start := time.Now()
		for w := 0; w < clients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					if err := one(w, i); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	nonce := time.Now().UnixNano()
	// Idle: what the stack asks of the engine with no request coming in (the
	// stream pollers' backoff, the parked-run schedule), after start-up.
	time.Sleep(5 * time.Second)
	idle0, idleT := proxy.total(), time.Now()
	time.Sleep(10 * time.Second)
	idle := float64(proxy.total()-idle0) / time.Since(idleT).Seconds()
	before := proxy.snapshot()
	var posted atomic.Int64
	b.ResetTimer()
	runs := run(func(w, i int) error {
		req, _ := http.NewRequest("POST", url+"/runs", strings.NewReader(`{"workflowId":"conformance-noop","inputs":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", testutil.Bearer(devKey))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("tp-%d-%02d-%08d-0123456789", nonce, w, i))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("POST /runs: %d", resp.StatusCode)
		}
		posted.Add(1)
		return nil
	})
	// Let the executor finish the runs just posted (its calls are part of
	// a run's cost), then count: the stack is idle again when the count
	// stops moving.
	for last := int64(-1); ; {
		time.Sleep(2 * time.Second)
		if n := proxy.total(); n-last < int64(4*idle)+4 {
			break
		} else {
			last = n
		}
	}
	perRun := proxy.since(before)
	puts := run(func(w, i int) error {
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
	})
	b.StopTimer()
	b.ReportMetric(runs, "runs/s")
	b.ReportMetric(puts, "putitems/s")
	b.ReportMetric(runs/puts, "ratio")
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
	b.ReportMetric(engine/float64(posted.Load()), "engine-ms/run")
	b.ReportMetric(0, "ns/op")
}

// callCounter is a reverse proxy in front of the engine counting DynamoDB
// (and DynamoDB Streams) calls by operation (X-Amz-Target).
type callCounter struct {
	*httptest.Server
	mu   sync.Mutex
	ops  map[string]int64
	busy map[string]time.Duration // summed time to answer, by operation
}

func newCallCounter(b *testing.B, target string) *callCounter {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	c := &callCounter{ops: map[string]int64{}, busy: map[string]time.Duration{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target")
		if i := strings.LastIndexByte(op, '.'); i >= 0 {
			op = op[i+1:]
		}
		t0 := time.Now()
		rp.ServeHTTP(w, r)
		d := time.Since(t0)
		c.mu.Lock()
		c.ops[op]++
		c.busy[op] += d
		c.mu.Unlock()
	}))
	b.Cleanup(c.Close)
	return c
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
