package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/testutil"
)

const stallKey = "idk_stall_tenant_0a1b2c3d4e5f6789"

// TestDevStalledStoreNeverHangsARequest: `idemkit dev` on DynamoDB Local
// and on moto, its engine stopped (SIGSTOP) at the moment a POST /runs
// writes its completion (the Layer-1 outcome and the run in one
// transaction). The completion is bounded by the request timeout, so the
// client gets 503 idemkit.store_unavailable with Retry-After and the error
// envelope, written well before the server's write timeout: never a hang
// or a dropped connection. Once the engine resumes (SIGCONT), retries with
// the same Idempotency-Key see what the lease and fence rules say (in
// flight, the replay, or a new execution when the uncommitted transaction
// was released) and end in one run, replayed from then on. The two engines
// run at once, each an engine and a dev of its own: each one's time is
// mostly the request timeout and the held call run out.
func TestDevStalledStoreNeverHangsARequest(t *testing.T) {
	dynamotest.ForKindsConcurrently(t, []string{dynamotest.DynamoDBLocal, dynamotest.Moto}, testDevStalledStore)
}

func testDevStalledStore(t *testing.T, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv, err := emulator.Start(ctx, kind, emulator.Options{ToolsDir: filepath.Join(dynamotest.RepoRoot(), "tools"), SharedDB: true})
	if err != nil {
		testutil.Unavailable(t, "%s unavailable: %v", kind, err)
	}
	var mu sync.Mutex
	armed, stopped := false, false
	// holdNext: the next call to the engine is held past dev's request
	// timeout before it is sent on, as a loaded machine may hold any call.
	holdNext := false
	resume := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			_ = srv.Resume()
			stopped = false
		}
	}
	t.Cleanup(func() { resume(); srv.Stop() })

	// Between dev and its engine: once armed, the first transaction (the
	// completion of createRun) stops the engine before it is sent on, and
	// is sent on only once every thread of the engine has stopped (Pause
	// waits for that state; a bare SIGSTOP returns while a thread of the
	// engine may still run and answer it).
	target, _ := url.Parse(srv.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hold := holdNext
		holdNext = false
		mu.Unlock()
		if hold {
			time.Sleep(5 * time.Second)
		}
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
			mu.Lock()
			if armed && !stopped {
				armed, stopped = false, true
				if err := srv.Pause(ctx); err != nil {
					t.Error(err)
				}
			}
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	_, base := startDevInProcess(t, "--dynamodb-endpoint", proxy.URL, "--request-timeout", "4s", "--api-key", stallKey+"=stall-tenant")
	post := func(key string) (*http.Response, map[string]any, error) {
		req, _ := http.NewRequest("POST", base+"/runs", strings.NewReader(`{"workflowId":"conformance-noop"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+stallKey)
		req.Header.Set(idem.HeaderKey, key)
		c := &http.Client{Timeout: time.Minute} // far beyond the bound under test
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp, m, nil
	}
	// settle posts key until it is answered 201, through the answers a
	// request may get on a loaded machine however healthy the engine:
	// 503 store_unavailable with Retry-After when the request timeout ran
	// out first, then 409 in flight while that attempt's lease lives (the
	// ceiling is a hang guard: the lease ends on dev's wall clock).
	settle := func(what, key string) (*http.Response, map[string]any) {
		t.Helper()
		hang := time.Now().Add(2 * time.Minute)
		for tries := 0; ; tries++ {
			r, m, err := post(key)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", what, err)
			case r.StatusCode == 201:
				return r, m
			case time.Now().Before(hang) && r.Header.Get("Retry-After") != "" &&
				(r.StatusCode == 409 && m["error"] == "idempotency_in_flight" || r.StatusCode == 503 && m["error"] == idem.CodeStoreUnavailable):
				t.Logf("%s, try %d: %d %v; again", what, tries, r.StatusCode, m["error"])
				time.Sleep(500 * time.Millisecond)
			default:
				t.Fatalf("%s, try %d: %d %v", what, tries, r.StatusCode, m)
			}
		}
	}
	// A healthy request first (the engine warm). Its first call to the
	// engine is held past the request timeout, so the loaded machine's
	// answer (503, then maybe 409 in flight) is always met here.
	mu.Lock()
	holdNext = true
	mu.Unlock()
	settle("warm-up", "stall-warm-0123456789abcdef")

	// The request timeout runs from the request's arrival, so on a loaded
	// machine the authorizer and the claim may use it up before the
	// completion is sent: that request is answered 503 too (the claim's
	// call was cut short), without the stall under test. Such an attempt
	// is disarmed and the scenario tried again on a fresh key, until the
	// completion itself meets the stopped engine (the deadline is a hang
	// guard only).
	var (
		key string
		r   *http.Response
		m   map[string]any
	)
	for attempt := 0; ; attempt++ {
		key = fmt.Sprintf("stall-key-%d-0123456789abcdef", attempt)
		mu.Lock()
		armed = true
		mu.Unlock()
		r, m, err = post(key)
		if err != nil {
			t.Fatalf("no HTTP answer while the engine was stopped during the completion: %v", err)
		}
		mu.Lock()
		hit := stopped
		armed = false
		mu.Unlock()
		if hit {
			break
		}
		if r.StatusCode != 503 || m["error"] != idem.CodeStoreUnavailable || ctx.Err() != nil {
			t.Fatalf("the completion was not a transaction: %d %v", r.StatusCode, m)
		}
		t.Logf("attempt %d: the request timed out before its completion (the machine is slow): %d %v; again", attempt, r.StatusCode, m)
	}
	if r.StatusCode != 503 || m["error"] != idem.CodeStoreUnavailable || m["message"] == "" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("stalled completion: %d %v (Retry-After %q); want 503 %s with Retry-After", r.StatusCode, m, r.Header.Get("Retry-After"), idem.CodeStoreUnavailable)
	}
	resume()

	// Retries until a 201: in flight (409, Retry-After) while the lease
	// lives if the completion's fate is open; a replay if it landed; a new
	// execution if it was released (its transaction, the run included,
	// never committed). Then every retry replays that one run. The lease
	// ends on dev's wall clock, so the in-flight answers last as long as
	// it does: the ceiling is a hang guard, far beyond any lease dev
	// gives a 4 s request. A retry whose request timeout ran out on the
	// loaded machine is answered 503 with Retry-After, and is retried too.
	_, m = settle("a retry after the engine resumed", key)
	runID := m["runId"]
	if r, m = settle("the replay", key); m["runId"] != runID || r.Header.Get("OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("replay: %v, want run %v replayed", m, runID)
	}
}
