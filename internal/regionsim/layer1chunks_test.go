package regionsim_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestLayer1ChunkedReplayBeforeItsChunksReplicate: under
// reconciled-records a response larger than the record keeps inline is
// stored in chunk items beside the record, and the global table replicates
// items independently. A replay in the second region that reads the
// record before its chunks have arrived must not be answered as a
// response gone for good (410 idemkit.response_not_kept, final: a client
// never retries it) when the chunks will arrive: it is answered
// 503 idemkit.store_unavailable with Retry-After, the handler is not run,
// and the retry after the chunks arrived replays the response. A chunk
// still missing long after the completion (five minutes) is lost, 410 as
// in one region. The store is built as the api function builds it
// (kit.Layer1Store).
func TestLayer1ChunkedReplayBeforeItsChunksReplicate(t *testing.T) {
	p := newPair(t, "IdempotencyTable")
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	raw := make([]byte, 96<<10)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	big := `{"runId":"acme/run-1","blob":"` + base64.StdEncoding.EncodeToString(raw) + `"}`
	var runs atomic.Int32
	srv := map[string]*httptest.Server{}
	metrics := map[string]*bytes.Buffer{}
	for _, r := range []string{eu, us} {
		metrics[r] = new(bytes.Buffer)
		rec := emf.New(metrics[r], "idemkit")
		st, err := kit.Layer1Store(p.db(r), p.tables[r], settings.CrossRegionReconciled, idem.PolicyOpenWOP.Retention, rec)
		if err != nil {
			t.Fatal(err)
		}
		g, err := idem.New(idem.Config{Store: st, Metrics: rec, HTTPTenant: func(*http.Request) (string, bool) { return "acme", true },
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clock.Now}}})
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
	code := func(b string) string {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal([]byte(b), &e)
		return e.Error
	}
	if resp, b := post(eu); resp.StatusCode != http.StatusCreated || b != big {
		t.Fatalf("eu: %d", resp.StatusCode)
	}
	// Replicate eu's items to us: the record first, its chunks later.
	var chunks []map[string]types.AttributeValue
	for _, it := range scanAll(t, p, eu) {
		if pk, _ := it["pk"].(*types.AttributeValueMemberS); pk != nil && strings.HasPrefix(pk.Value, "chunk:") {
			chunks = append(chunks, it)
			continue
		}
		if _, err := p.db(us).PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(p.tables[us]), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if len(chunks) == 0 {
		t.Fatal("the response was stored inline; want chunk items")
	}
	clock.Advance(time.Second)
	resp, b := post(us)
	if resp.StatusCode != http.StatusServiceUnavailable || code(b) != idem.CodeStoreUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("us, the record replicated, its chunks not yet: %d %q Retry-After %q; want 503 %s with Retry-After (the chunks will arrive)",
			resp.StatusCode, code(b), resp.Header.Get("Retry-After"), idem.CodeStoreUnavailable)
	}
	// Counted under its own metric as well, which the store-unavailable
	// alarm subtracts: a replica's replication lag is no store outage.
	if u, c := emfCount(t, metrics[us], idem.MetricStoreUnavailable), emfCount(t, metrics[us], kit.MetricChunksReplicating); u != 1 || c != 1 {
		t.Fatalf("us: %s %v, %s %v; want 1 and 1 (the alarm reads their difference, 0)", idem.MetricStoreUnavailable, u, kit.MetricChunksReplicating, c)
	}
	// Long after the completion a chunk still missing is lost: 410.
	clock.Advance(time.Hour)
	if resp, b := post(us); resp.StatusCode != http.StatusGone || code(b) != idem.CodeResponseNotKept {
		t.Fatalf("us, a chunk still missing an hour after the completion: %d %q; want 410 %s", resp.StatusCode, code(b), idem.CodeResponseNotKept)
	}
	for _, it := range chunks {
		if _, err := p.db(us).PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(p.tables[us]), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, b := post(us); resp.StatusCode != http.StatusCreated || !isReplay(resp) || b != big {
		t.Fatalf("us, the chunks arrived: %d replay=%v; want the response replayed", resp.StatusCode, isReplay(resp))
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times; want once", n)
	}
	if c := emfCount(t, metrics[us], kit.MetricChunksReplicating); c != 1 {
		t.Fatalf("us: %s %v after the 410 and the replay; want 1 (only the 503)", kit.MetricChunksReplicating, c)
	}
}

// emfCount is the sum of metric name's values among the EMF lines in b.
func emfCount(t *testing.T, b *bytes.Buffer, name string) float64 {
	t.Helper()
	var n float64
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("EMF line %q: %v", l, err)
		}
		if v, ok := m[name].(float64); ok {
			n += v
		}
	}
	return n
}
