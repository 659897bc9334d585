package regionsim_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/emf"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestLayer1WaitReadsACompletionBeforeItsChunksReplicate: under
// reconciled-records a duplicate sent to the second region while the
// first request is still executing in the first waits there on the
// replicated claim, polling the record. The completion replicates as two
// items of the global table, the record and its response's chunk items,
// in either order: a poll that reads the completed record before its
// chunks must not end the wait with 410 idemkit.response_not_kept (final:
// a client never retries it, and the answer arrives a moment later), as
// the duplicate's claim read of the same record would not (it is a 503
// with Retry-After there: TestLayer1ChunkedReplayBeforeItsChunksReplicate).
// The wait polls on, and replays the response once the chunks are there;
// the handler runs once. The polls are counted in no metric (no 503 is
// answered). The replication is done by hand, at the wait's sleeps on the
// Guard's clock (no real time).
func TestLayer1WaitReadsACompletionBeforeItsChunksReplicate(t *testing.T) {
	p := newPair(t, "IdempotencyTable")
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	raw := make([]byte, 96<<10)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	big := `{"runId":"acme/run-1","blob":"` + base64.StdEncoding.EncodeToString(raw) + `"}`
	var runs atomic.Int32
	// sleeps is what the us Guard's n-th sleep of its wait does first
	// (the replication, by hand).
	var (
		mu     sync.Mutex
		sleeps []func()
		slept  int
	)
	srv := map[string]*httptest.Server{}
	metrics := map[string]*bytes.Buffer{}
	for _, r := range []string{eu, us} {
		metrics[r] = new(bytes.Buffer)
		rec := emf.New(metrics[r], "idemkit")
		st, err := kit.Layer1Store(p.db(r), p.tables[r], settings.CrossRegionReconciled, idem.PolicyOpenWOP.Retention, rec)
		if err != nil {
			t.Fatal(err)
		}
		clk := idemtest.ClockFuncs{NowFunc: clock.Now, SleepFunc: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			if slept < len(sleeps) && sleeps[slept] != nil {
				sleeps[slept]()
			}
			slept++
			mu.Unlock()
			clock.Advance(d)
			return ctx.Err()
		}}
		g, err := idem.New(idem.Config{Store: st, Metrics: rec, HTTPTenant: func(*http.Request) (string, bool) { return "acme", true },
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Test: idem.TestConfig{Clock: clk}})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /runs", g.Middleware(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			runs.Add(1)
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(rw, big)
		})))
		srv[r] = httptest.NewServer(mux)
		t.Cleanup(srv[r].Close)
	}
	post := func(r string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv[r].URL+"/runs", strings.NewReader(`{"workflow":"w1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, b := post(eu); resp.StatusCode != http.StatusCreated || b != big {
		t.Fatalf("eu: %d", resp.StatusCode)
	}
	var record map[string]types.AttributeValue
	var chunks []map[string]types.AttributeValue
	for _, it := range scanAll(t, p, eu) {
		if pk, _ := it["pk"].(*types.AttributeValueMemberS); pk != nil && strings.HasPrefix(pk.Value, "chunk:") {
			chunks = append(chunks, it)
		} else {
			record = it
		}
	}
	if record == nil || len(chunks) == 0 {
		t.Fatalf("eu holds a record: %t, %d chunk items; want the record and its chunks", record != nil, len(chunks))
	}
	put := func(it map[string]types.AttributeValue) {
		t.Helper()
		if _, err := p.db(us).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(p.tables[us]), Item: it}); err != nil {
			t.Error(err)
		}
	}
	// us holds eu's claim as it replicated while eu's request executed:
	// the same record, pending, its owner alive and its lease running.
	claim := map[string]types.AttributeValue{}
	for k, v := range record {
		switch k {
		case "resp", "respEnc", "respSha", "respLen", "respChunks", "respNonce", "status":
			continue
		}
		claim[k] = v
	}
	now := clock.Now()
	claim["state"] = &types.AttributeValueMemberS{Value: string(idem.StatePending)}
	claim["leaseAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)}
	claim["renewedAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)}
	put(claim)
	// The duplicate in us waits: at its first sleep the completed record
	// arrives, its chunks only at its third.
	mu.Lock()
	sleeps = []func(){
		func() { put(record) },
		nil,
		func() {
			for _, it := range chunks {
				put(it)
			}
		},
	}
	mu.Unlock()
	resp, b := post(us)
	if resp.StatusCode != http.StatusCreated || !isReplay(resp) || b != big {
		t.Fatalf("us, a duplicate waiting while the completion replicated, the record before its chunks: %d replay=%v %.200s; want the response replayed once the chunks arrived",
			resp.StatusCode, isReplay(resp), b)
	}
	mu.Lock()
	defer mu.Unlock()
	if slept < 3 {
		t.Fatalf("the wait slept %d times; want at least 3 (the chunks arrive at the third)", slept)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times; want once", n)
	}
	if u, c := emfCount(t, metrics[us], idem.MetricStoreUnavailable), emfCount(t, metrics[us], kit.MetricChunksReplicating); u != 0 || c != 0 {
		t.Fatalf("us: %s %v, %s %v; want 0 and 0 (no 503 was answered)", idem.MetricStoreUnavailable, u, kit.MetricChunksReplicating, c)
	}
}
