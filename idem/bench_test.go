package idem_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

func body1KB() string {
	var b strings.Builder
	b.WriteString(`{"workflow":"wf_01HZX","input":{"items":[`)
	for i := 0; b.Len() < 1000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%04d","qty":%d,"note":"caf\u00e9 <&>"}`, i, i%7)
	}
	b.WriteString(`]}}`)
	return b.String()
}

func benchGuard(b *testing.B) *idem.Guard {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func benchHandler(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"runId":"run_1"}`}, nil
}

// BenchmarkHTTPAPIFirstExecution1KB is the middleware's own cost for a first
// execution (claim + complete) of a 1 KB JSON body, with the in-memory store.
func BenchmarkHTTPAPIFirstExecution1KB(b *testing.B) {
	benchFirstExecutions(b, context.Background(), benchGuard(b))
}

// benchFirstExecutions runs b.N first executions of a 1 KB JSON body
// through g's HTTP API adapter under ctx, each under a key of its own
// (built before the timer starts).
func benchFirstExecutions(b *testing.B, ctx context.Context, g *idem.Guard) {
	h := g.HTTPAPI(benchHandler)
	ev := v2event("POST", "POST /runs", testKey, body1KB())
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("k_%022d", i)
	}
	b.SetBytes(int64(len(ev.Body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev.Headers["idempotency-key"] = keys[i]
		if r, _ := h(ctx, ev); r.StatusCode != 201 {
			b.Fatal(r.StatusCode)
		}
	}
}

// windowStore is the in-memory store as a table with TTL holds it in a
// steady state: the records of the last window claims only. Every window
// claims it starts a fresh memstore.Store and drops the previous one (as
// DynamoDB's TTL deletes expired records), so the heap stops growing with
// the number of requests the benchmark makes. Claims only ever name new
// keys in the benchmark, so no claim needs a record of a dropped window.
// Not safe for concurrent use: the benchmark is sequential.
type windowStore struct {
	idem.Store
	window, n int
}

func (s *windowStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	if s.n++; s.n%s.window == 0 {
		s.Store = memstore.New()
	}
	return s.Store.Claim(ctx, rec, now)
}

// BenchmarkHTTPAPIFirstExecution1KBSteadyState is
// BenchmarkHTTPAPIFirstExecution1KB with the records of the last 4,096
// requests kept (windowStore) instead of every record the benchmark
// made: BenchmarkHTTPAPIFirstExecution1KB keeps hundreds of thousands of
// records live in the process, which no deployment does (its records
// live in DynamoDB), and the garbage collector marks that heap on every
// cycle. The difference between the two is that marking, not the
// middleware's own work.
func BenchmarkHTTPAPIFirstExecution1KBSteadyState(b *testing.B) {
	st := &windowStore{Store: memstore.New(), window: 4096}
	g, err := idem.New(idem.Config{Store: st, Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	benchFirstExecutions(b, context.Background(), g)
}

// BenchmarkHTTPAPIFirstExecution1KBInLambda is the first execution inside
// a Lambda invocation (a Lambda context whose deadline is shorter than the
// lease; 30 s, a common function timeout): the lease ends with the
// invocation, so no heartbeat runs.
func BenchmarkHTTPAPIFirstExecution1KBInLambda(b *testing.B) {
	ctx, cancel := context.WithTimeout(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "bench"}), 30*time.Second)
	defer cancel()
	benchFirstExecutions(b, ctx, benchGuard(b))
}

// BenchmarkHTTPAPIReplay1KB is the middleware's own cost for a replay.
func BenchmarkHTTPAPIReplay1KB(b *testing.B) {
	g := benchGuard(b)
	h := g.HTTPAPI(benchHandler)
	ev := v2event("POST", "POST /runs", testKey, body1KB())
	ctx := context.Background()
	h(ctx, ev)
	b.SetBytes(int64(len(ev.Body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r, _ := h(ctx, ev); r.StatusCode != 201 {
			b.Fatal(r.StatusCode)
		}
	}
}

// BenchmarkHTTPAPIBaseline1KB is the bare adapter path with no key (no
// deduplication), for comparison.
func BenchmarkHTTPAPIBaseline1KB(b *testing.B) {
	g := benchGuard(b)
	h := g.HTTPAPI(benchHandler)
	ev := v2event("POST", "POST /runs", "", body1KB())
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h(ctx, ev)
	}
}

func body1MB() []byte {
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	for i := 0; b.Len() < 1<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"row \u00e9 %d","v":[1.5,2,"x"],"ok":true}`, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkDigestJSON1MB measures the JCS digest throughput on a token-dense
// 1 MB body (docs/PERFORMANCE.md states the goal, 600 MB/s, and the figures).
func BenchmarkDigestJSON1MB(b *testing.B) {
	body := body1MB()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer() // building the body is not part of the digest
	for i := 0; i < b.N; i++ {
		if _, err := idem.DigestJSON(body, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigestBytes1MB measures the byte digest throughput.
func BenchmarkDigestBytes1MB(b *testing.B) {
	body := body1MB()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idem.DigestBytes(body)
	}
}
