package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// devStoreTimeout is the --request-timeout of the dev server under test,
// and devStoreBound the most a client may wait for its answer while the
// store is paused or dead: a hang guard (an unbounded request never
// answers at all), far beyond the timeout plus any scheduling delay of a
// loaded machine, so that no verdict depends on the machine's speed.
const (
	devStoreTimeout = 8 * time.Second
	devStoreBound   = devStoreTimeout + 90*time.Second
)

// TestIdemkitDevSurvivesItsStore pauses (SIGSTOP) and then kills (SIGKILL)
// the DynamoDB engine under a running `idemkit dev`, on each engine with
// streams. While the store is paused or dead, authenticated requests are
// answered 503 with the error envelope (idemkit.store_unavailable) and
// Retry-After within the bound, not a 500 and not a hang. Once the paused
// store resumes, retrying the same Idempotency-Key yields one run, and its
// webhook is delivered exactly once. The engines run side by side: each
// has its own engine process and dev, and most of each run is spent
// waiting for dev's request timeout while its store is paused or dead.
func TestIdemkitDevSurvivesItsStore(t *testing.T) {
	for _, kind := range devEngines {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testDevSurvivesStore(t, kind)
		})
	}
}

func testDevSurvivesStore(t *testing.T, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store, err := emulator.Start(ctx, kind, emulator.Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools")})
	if err != nil {
		testutil.Unavailable(t, "%s unavailable: %v", kind, err)
	}
	defer func() {
		_ = store.Resume()
		store.Stop()
	}()

	var mu sync.Mutex
	deliveries := map[string]int{} // provider Idempotency-Key -> deliveries
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		deliveries[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()

	bin := buildHost(t, t.TempDir(), "idemkit", "cmd/idemkit")
	addr := testutil.FreeAddr(t)
	p := start(t, os.Environ(), bin, "dev", "--addr", addr, "--dynamodb-endpoint", store.Endpoint,
		"--request-timeout", devStoreTimeout.String(), "--allow-loopback-webhooks", "--api-key", devKey+"=e2e-tenant")
	d := &devServer{url: "http://" + addr, proc: p}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer rcancel()
	if err := testutil.WaitHTTP(rctx, d.url+"/.well-known/openwop", p.Done()); err != nil {
		t.Fatalf("idemkit dev not ready: %v\n%s", err, p.Log.String())
	}
	body := `{"workflowId":"webhook","inputs":{"url":"` + recv.URL + `/hook","payload":{"n":1}}}`
	key := func(s string) string { return fmt.Sprintf("%s-%d-0123456789abcdef", s, time.Now().UnixNano()) }

	// Before: one run, delivered once. (On a loaded machine even a healthy
	// store can miss the deadline: a 503 is retried with the same key.)
	k0 := key("before")
	r, m := d.do(t, "POST", "/runs", k0, body)
	// The ceiling is a hang guard: an in-flight answer lasts as long as
	// the lease of a timed-out attempt does, on dev's wall clock.
	for hang := time.Now().Add(3 * time.Minute); (r.StatusCode == 503 || r.StatusCode == 409 && m["error"] == "idempotency_in_flight") && time.Now().Before(hang); {
		time.Sleep(time.Second)
		r, m = d.do(t, "POST", "/runs", k0, body)
	}
	if r.StatusCode != 201 {
		t.Fatalf("POST before the pause: %d %v", r.StatusCode, m)
	}
	before := m["runId"].(string)
	if st := d.waitStatus(t, before); st["status"] != "completed" {
		t.Fatalf("run %v", st)
	}

	// unavailable asserts that each request is answered 503
	// store_unavailable with Retry-After, within the bound. The requests
	// are sent together (each waits out dev's request timeout) and every
	// one is checked.
	type request struct{ what, method, path, ik, body string }
	unavailable := func(reqs ...request) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]string, len(reqs))
		for i, q := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started := time.Now()
				r, m, err := tryDev(q.method, d.url+q.path, q.ik, q.body)
				took := time.Since(started)
				switch {
				case err != nil:
					errs[i] = fmt.Sprintf("%s: %v", q.what, err)
				case r.StatusCode != 503 || m["error"] != "idemkit.store_unavailable" || m["message"] == "" || r.Header.Get("Retry-After") == "":
					errs[i] = fmt.Sprintf("%s: %d %v (Retry-After %q); want 503 idemkit.store_unavailable with Retry-After", q.what, r.StatusCode, m, r.Header.Get("Retry-After"))
				case took > devStoreBound:
					errs[i] = fmt.Sprintf("%s: answered after %s, bound %s", q.what, took, devStoreBound)
				}
			}()
		}
		wg.Wait()
		if msg := strings.Join(slices.DeleteFunc(errs, func(s string) bool { return s == "" }), "\n"); msg != "" {
			t.Fatalf("%s\n%s", msg, p.Log.String())
		}
	}

	// Paused: the store accepts connections and never answers. Pause
	// returns once every thread of the engine has stopped, so no request
	// below can still be answered by it.
	must(t, store.Pause(ctx))
	k1 := key("paused")
	unavailable(request{"POST /runs while paused", "POST", "/runs", k1, body},
		request{"GET /runs/{id} while paused", "GET", "/runs/" + strings.ReplaceAll(before, "/", "~2F"), "", ""})
	must(t, store.Resume())

	// Back: retrying k1 ends in one run (409 in flight or 503 meanwhile,
	// both with Retry-After), whose webhook is delivered once.
	var runID string
	deadline := time.Now().Add(2 * time.Minute)
	for runID == "" {
		r, m := d.do(t, "POST", "/runs", k1, body)
		switch {
		case r.StatusCode == 201:
			runID = m["runId"].(string)
		case (r.StatusCode == 409 && m["error"] == "idempotency_in_flight" || r.StatusCode == 503) && r.Header.Get("Retry-After") != "":
			if time.Now().After(deadline) {
				t.Fatalf("POST %s still %d after the store came back\n%s", k1, r.StatusCode, p.Log.String())
			}
			time.Sleep(250 * time.Millisecond)
		default:
			t.Fatalf("POST after the pause: %d %v", r.StatusCode, m)
		}
	}
	if r, m := d.do(t, "POST", "/runs", k1, body); r.StatusCode != 201 || m["runId"] != runID || r.Header.Get("OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("replay of %s: %d %v, want run %s", k1, r.StatusCode, m, runID)
	}
	if st := d.waitStatus(t, runID); st["status"] != "completed" {
		t.Fatalf("run %v", st)
	}
	// Each run's witness: its one effect completed by its one attempt.
	// That is the state after which no delivery can follow (a completed
	// effect is answered from the ledger, never performed again; another
	// attempt would be a row here), so the count below is final when it is
	// read: no wait for late deliveries.
	provider := map[string]bool{}
	for _, id := range []string{before, runID} {
		_, w := d.do(t, "GET", "/runs/"+strings.ReplaceAll(id, "/", "~2F")+"/effects", "", "")
		rows, _ := w["effects"].([]any)
		if len(rows) != 1 || rows[0].(map[string]any)["state"] != "completed" {
			t.Fatalf("witness of %s: %v, want one effect completed by one attempt", id, w)
		}
		pk, _ := rows[0].(map[string]any)["providerKey"].(string)
		provider[pk] = true
	}
	mu.Lock()
	total, twice := 0, 0
	for k, n := range deliveries {
		total += n
		if n > 1 || !provider[k] {
			twice++
		}
	}
	mu.Unlock()
	if total != 2 || twice != 0 || len(provider) != 2 {
		t.Fatalf("deliveries %v (witnessed keys %v): want two runs delivered once each", deliveries, provider)
	}

	// Dead: connections are refused.
	must(t, syscall.Kill(-store.PID(), syscall.SIGKILL))
	unavailable(request{"POST /runs with the store dead", "POST", "/runs", key("dead"), body},
		request{"GET /runs/{id} with the store dead", "GET", "/runs/" + strings.ReplaceAll(runID, "/", "~2F"), "", ""})
}

// tryDev is devServer.do for a goroutine other than the test's: an error
// is returned, not a t.Fatal.
func tryDev(method, url, key, body string) (*http.Response, map[string]any, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", testutil.Bearer(devKey))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
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
