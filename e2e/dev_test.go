package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/emulator/proc"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

const devKey = "idk_e2e_dev_key_0123456789abcdef"

// devServer is a running `idemkit dev`.
type devServer struct {
	url  string
	proc *testutil.Process
}

// devEngines are the engines `idemkit dev` drives its executor and
// auditor on from the tables' streams (dynalite has none: there dev feeds
// its executor from its own writes, devstack's
// TestRunsExecuteOnAnEngineWithoutStreams).
var devEngines = []string{emulator.DynamoDBLocal, emulator.Moto}

// startDev builds ./cmd/idemkit (once per test process: testutil.Build)
// and starts `idemkit dev --emulator engine` on a free loopback port with
// loopback webhooks allowed; it returns once GET /.well-known/openwop
// answers 200, and the time that took.
func startDev(t testing.TB, engine string) (*devServer, time.Duration) {
	t.Helper()
	if _, err := os.Stat(shared.ModuleRoot()); err != nil {
		t.Fatal(err)
	}
	bin := buildHost(t, t.TempDir(), "idemkit", "cmd/idemkit")
	addr := testutil.FreeAddr(t)
	started := time.Now()
	p := start(t, os.Environ(), bin, "dev", "--emulator", engine, "--addr", addr, "--allow-loopback-webhooks", "--api-key", devKey+"=e2e-tenant")
	d := &devServer{url: "http://" + addr, proc: p}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	switch err := testutil.WaitHTTP(ctx, d.url+"/.well-known/openwop", p.Done()); {
	case err == nil:
		return d, time.Since(started)
	case errors.Is(err, proc.ErrExited) && strings.Contains(p.Log.String(), "--emulator"):
		testutil.Unavailable(t, "idemkit dev cannot start an emulator:\n%s", p.Log.String())
	case errors.Is(err, proc.ErrExited):
		t.Fatalf("idemkit dev exited:\n%s", p.Log.String())
	default:
		t.Fatalf("idemkit dev not ready after 3m: %v\n%s", err, p.Log.String())
	}
	return nil, 0
}

func (d *devServer) do(t testing.TB, method, path, key, body string) (*http.Response, map[string]any) {
	t.Helper()
	return testutil.DoJSON(t, method, d.url+path, body, "Authorization", testutil.Bearer(devKey), "Idempotency-Key", key)
}

// waitStatus polls getRun until the run reaches a terminal status.
func (d *devServer) waitStatus(t testing.TB, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // a hang guard, not a speed limit
	for {
		_, m := d.do(t, "GET", "/runs/"+strings.ReplaceAll(id, "/", "~2F"), "", "")
		switch m["status"] {
		case "completed", "failed", "cancelled":
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not finish: %v\n%s", id, m, d.proc.Log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestIdemkitDev(t *testing.T) {
	for _, engine := range devEngines {
		t.Run(engine, func(t *testing.T) { testIdemkitDev(t, engine) })
	}
}

func testIdemkitDev(t *testing.T, engine string) {
	d, _ := startDev(t, engine)

	t.Run("duplicate POST returns one run", func(t *testing.T) {
		key := fmt.Sprintf("dup-%d-0123456789abcdef", time.Now().UnixNano())
		body := `{"workflowId":"conformance-noop","inputs":{}}`
		var wg sync.WaitGroup
		ids := make([]any, 6)
		replays := atomic.Int32{}
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					r, m := d.do(t, "POST", "/runs", key, body)
					if r.StatusCode == 409 && m["error"] == "idempotency_in_flight" {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					if r.StatusCode != 201 {
						t.Errorf("status %d %v", r.StatusCode, m)
						return
					}
					if r.Header.Get("OpenWOP-Idempotent-Replay") == "true" {
						replays.Add(1)
					}
					ids[i] = m["runId"]
					return
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			if id == nil || id != ids[0] {
				t.Fatalf("runIds %v: want one run", ids)
			}
		}
		if replays.Load() != int32(len(ids)-1) {
			t.Fatalf("%d replays, want %d", replays.Load(), len(ids)-1)
		}
		if m := d.waitStatus(t, ids[0].(string)); m["status"] != "completed" {
			t.Fatalf("run %v", m)
		}
	})

	t.Run("webhook first delivery cut", func(t *testing.T) {
		var mu sync.Mutex
		var keys []string
		var cut atomic.Bool
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			mu.Lock()
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			mu.Unlock()
			if cut.CompareAndSwap(false, true) {
				c, _, _ := w.(http.Hijacker).Hijack()
				c.Close() // the delivery reached us; its answer never leaves
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer recv.Close()
		body := `{"workflowId":"webhook","inputs":{"url":"` + recv.URL + `/hook","payload":{"order":42}}}`
		r, m := d.do(t, "POST", "/runs", fmt.Sprintf("wh-%d-0123456789abcdef", time.Now().UnixNano()), body)
		if r.StatusCode != 201 {
			t.Fatalf("%d %v", r.StatusCode, m)
		}
		id := m["runId"].(string)
		if st := d.waitStatus(t, id); st["status"] != "completed" {
			t.Fatalf("run %v", st)
		}
		mu.Lock()
		got := append([]string(nil), keys...)
		mu.Unlock()
		if len(got) < 1 || len(got) > 2 || got[0] == "" || (len(got) == 2 && got[0] != got[1]) {
			t.Fatalf("provider saw keys %q: want one key, at most twice", got)
		}
		// The witness: one effect, recorded once, every attempt visible.
		_, w := d.do(t, "GET", "/runs/"+strings.ReplaceAll(id, "/", "%2F")+"/effects", "", "")
		rows, _ := w["effects"].([]any)
		effects, completed, escaped := map[any]bool{}, 0, 0
		for _, row := range rows {
			rm := row.(map[string]any)
			effects[rm["effectId"]] = true
			switch rm["state"] {
			case "completed":
				completed++
			case "escaped":
				escaped++
			}
			if rm["providerKey"] != got[0] || rm["nodeId"] != "deliver" || rm["keying"] != "activity-recipe" {
				t.Fatalf("row %v", rm)
			}
		}
		if w["runId"] != id || len(effects) != 1 || completed != 1 || len(rows) != len(got) || escaped != len(got)-1 {
			t.Fatalf("witness %v (provider saw %d deliveries)", w, len(got))
		}
		if strings.Contains(fmt.Sprint(w), "order") {
			t.Fatal("the witness carries the payload")
		}
	})

	t.Run("tenant isolation", func(t *testing.T) {
		_, m := d.do(t, "POST", "/runs", "", `{"workflowId":"conformance-noop"}`)
		id := m["runId"].(string)
		other := strings.Replace(id, "e2e-tenant/", "other-tenant/", 1)
		r, e := d.do(t, "GET", "/runs/"+strings.ReplaceAll(other, "/", "~2F"), "", "")
		if r.StatusCode != 403 || e["error"] != "id_tenant_mismatch" {
			t.Fatalf("%d %v", r.StatusCode, e)
		}
		req, _ := http.NewRequest("GET", d.url+"/runs/"+strings.ReplaceAll(id, "/", "~2F"), nil)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("no credential: %d", resp.StatusCode)
		}
	})
}

// BenchmarkDevReady measures how long `idemkit dev` takes to become ready
// (GET /.well-known/openwop answers 200), emulator start included, on each
// engine; the build is not timed.
func BenchmarkDevReady(b *testing.B) {
	for _, engine := range emulator.Kinds {
		b.Run(engine, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				d, took := startDev(b, engine)
				total += took
				d.proc.Stop()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/ready")
		})
	}
}

// TestIdemkitDevStopsCleanly: SIGTERM to `idemkit dev` alone (not its
// process group) ends it with status 0 and stops the emulator it started.
func TestIdemkitDevStopsCleanly(t *testing.T) {
	d, _ := startDev(t, emulator.DefaultDevKind())
	var motoPID int
	for _, line := range strings.Split(d.proc.Log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "dev: started the DynamoDB engine" {
			motoPID = int(m["pid"].(float64))
		}
	}
	if motoPID == 0 {
		t.Fatalf("no emulator pid in the log:\n%s", d.proc.Log.String())
	}
	must(t, d.proc.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-d.proc.Done():
	case <-time.After(2 * time.Minute): // a hang guard, not a speed limit
		t.Fatal("idemkit dev did not stop within 2 minutes of SIGTERM")
	}
	if code := d.proc.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	deadline := time.Now().Add(time.Minute) // a hang guard
	for syscall.Kill(motoPID, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the emulator (pid %d) outlived idemkit dev", motoPID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkDevQuickstart measures the README quickstart on each engine
// `idemkit dev` drives runs on: from start to ready, then a POST /runs, its
// replay, and polling until the run completed (ms/quickstart), and the
// run's POST-to-completed time alone (ms/run).
func BenchmarkDevQuickstart(b *testing.B) {
	for _, engine := range devEngines {
		b.Run(engine, func(b *testing.B) {
			var total, runs time.Duration
			for i := 0; i < b.N; i++ {
				d, ready := startDev(b, engine) // the build is not timed
				posted := time.Now()
				key := fmt.Sprintf("qs-%d-0123456789abcdef", time.Now().UnixNano())
				r, m := d.do(b, "POST", "/runs", key, `{"workflowId":"conformance-noop"}`)
				if r.StatusCode != 201 {
					b.Fatalf("POST /runs: %d %v", r.StatusCode, m)
				}
				if r2, _ := d.do(b, "POST", "/runs", key, `{"workflowId":"conformance-noop"}`); r2.Header.Get("OpenWOP-Idempotent-Replay") != "true" {
					b.Fatalf("second POST is not a replay: %d", r2.StatusCode)
				}
				if st := d.waitStatus(b, m["runId"].(string)); st["status"] != "completed" {
					b.Fatalf("run %v", st)
				}
				total += ready + time.Since(posted)
				runs += time.Since(posted)
				d.proc.Stop()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/quickstart")
			b.ReportMetric(float64(runs.Milliseconds())/float64(b.N), "ms/run")
		})
	}
}
