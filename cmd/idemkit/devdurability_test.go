package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevDurabilitySeamKillsAndRestarts: `idemkit dev --conformance-seams`
// (the built binary) is its own restart supervisor, and its durability seam
// stages the public suite's durability rows with a real process death:
//
//   - after-accept: the run is accepted, the process is SIGKILLed before
//     it is dispatched, and the restarted process runs it to completion;
//   - during-execution: the process is SIGKILLed at the run's first
//     node.started; the restarted process records workflow.restored and
//     re-executes the node (never completed without having been resumed);
//   - duplicate-delivery: one webhook run delivered to the executor three
//     times reaches the destination once;
//
// and GET /host/durability/bound declares a bound that is the sum of its
// terms. Each kill shows in the supervisor's log. The seam answers 401
// without a credential.
func TestDevDurabilitySeamKillsAndRestarts(t *testing.T) {
	bin, err := testutil.Build(t.TempDir(), "idemkit", "cmd/idemkit", nil, nil)
	if err != nil {
		testutil.Unavailable(t, "idemkit is not available: %v", err)
	}
	const key = "idk_durable-0123456789abcdef"
	addr := testutil.FreeAddr(t)
	cmd := exec.Command(bin, "dev", "--addr", addr, "--emulator", "moto", "--api-key", key+"=acme", "--allow-loopback-webhooks", "--conformance-seams")
	cmd.Env = append(os.Environ(), envSupervised+"=") // this test process sets "0"
	p := testutil.Start(t, cmd, 30*time.Second)
	base := "http://" + addr
	up := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := testutil.WaitHTTP(ctx, base+"/.well-known/openwop", p.Done()); err != nil {
			t.Fatalf("idemkit dev is not serving: %v\n%s", err, p.Log.String())
		}
	}
	up()
	do := func(method, path, body string) (*http.Response, map[string]any) {
		t.Helper()
		return testutil.DoJSON(t, method, base+path, body, "Authorization", testutil.Bearer(key))
	}
	if r, _ := testutil.DoJSON(t, "GET", base+"/host/durability/kill", ""); r.StatusCode != 401 {
		t.Fatalf("the seam without a credential: %d", r.StatusCode)
	}
	_, b := do("GET", "/host/durability/bound", "")
	cls := b["classes"].([]any)[0].(map[string]any)
	sum := 0.0
	for _, term := range cls["terms"].([]any) {
		sum += term.(map[string]any)["ms"].(float64)
	}
	if cls["class"] == "" || sum != cls["bound"].(float64) || sum <= 0 {
		t.Fatalf("declared bound: %v", b)
	}
	// read GETs path; ok is false when the process went away under the
	// request (the seam kills it when it chooses; the supervisor restarts it).
	read := func(path string) (status int, m map[string]any, ok bool) {
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", testutil.Bearer(key))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, false
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return 0, nil, false
		}
		return resp.StatusCode, m, true
	}
	// final waits for the run's terminal status (through restarts) and
	// returns its log's event types.
	final := func(runID string) []string {
		t.Helper()
		path := "/runs/" + url.PathEscape(runID)
		for deadline := time.Now().Add(3 * time.Minute); ; {
			up()
			st, m, ok := read(path)
			if ok && st == 200 && (m["status"] == "completed" || m["status"] == "failed" || m["status"] == "cancelled") {
				if m["status"] != "completed" {
					t.Fatalf("run %s: %v", runID, m)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s not terminal: %d %v\n%s", runID, st, m, p.Log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		var m map[string]any
		for ok := false; !ok; {
			up()
			var st int
			st, m, ok = read(path + "/events/poll?timeout=1")
			ok = ok && st == 200
		}
		var out []string
		for _, e := range m["events"].([]any) {
			ev := e.(map[string]any)
			s := ev["type"].(string)
			if n, _ := ev["nodeId"].(string); n != "" {
				s += " " + n
			}
			out = append(out, s)
		}
		return out
	}
	kills := func() int { return strings.Count(p.Log.String(), "the stack was killed") }

	r, m := do("POST", "/host/durability/kill", `{"mode":"after-accept","workflowId":"conformance-noop"}`)
	if r.StatusCode != 201 || m["runId"] == nil || m["recoveryBoundMs"] != cls["bound"] {
		t.Fatalf("after-accept: %d %v", r.StatusCode, m)
	}
	if ty := final(m["runId"].(string)); fmt.Sprint(ty) != "[run.started node.started effect node.completed effect run.completed]" || kills() != 1 {
		t.Fatalf("after-accept: log %v, %d kills\n%s", ty, kills(), p.Log.String())
	}

	r, m = do("POST", "/host/durability/kill", `{"mode":"during-execution","workflowId":"conformance-noop"}`)
	if r.StatusCode != 201 || m["runId"] == nil {
		t.Fatalf("during-execution: %d %v", r.StatusCode, m)
	}
	if ty := final(m["runId"].(string)); fmt.Sprint(ty) != "[run.started node.started effect workflow.restored node.completed effect run.completed]" || kills() != 2 {
		t.Fatalf("during-execution: log %v, %d kills\n%s", ty, kills(), p.Log.String())
	}

	var arrivals atomic.Int32
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer rx.Close()
	r, m = do("POST", "/host/durability/kill", `{"mode":"duplicate-delivery","effectUrl":"`+rx.URL+`/effect"}`)
	if r.StatusCode != 201 || m["runId"] == nil {
		t.Fatalf("duplicate-delivery: %d %v", r.StatusCode, m)
	}
	if ty := final(m["runId"].(string)); count(ty, "run.completed") != 1 || arrivals.Load() != 1 || kills() != 2 {
		t.Fatalf("duplicate-delivery: log %v, %d arrivals, %d kills", ty, arrivals.Load(), kills())
	}
}

// TestDevDurabilitySeamOnlyUnderTheSeams: without --conformance-seams the
// durability seam's and the idempotency hold's paths are the api's 404
// (the hold refuses a malformed body 400 with it); with it but no restart
// supervisor (idemkit dev in this process) the kill modes answer 409
// idemkit.durability_unsupervised and kill nothing, while
// duplicate-delivery, which kills nothing, is served.
func TestDevDurabilitySeamOnlyUnderTheSeams(t *testing.T) {
	const key = "idk_durable-0123456789abcdef"
	_, plain := startDevInProcess(t, "--emulator", "moto", "--api-key", key+"=acme")
	for _, path := range []string{"/host/durability/kill", "/host/durability/bound"} {
		if r, _ := testutil.DoJSON(t, "GET", plain+path, "", "Authorization", testutil.Bearer(key)); r.StatusCode != 404 {
			t.Fatalf("%s without the seams: %d", path, r.StatusCode)
		}
	}
	if r, _ := testutil.DoJSON(t, "POST", plain+"/conformance/seams/sample/test/idempotency/hold", `{"key":"k","holdMs":1000}`, "Authorization", testutil.Bearer(key)); r.StatusCode != 404 {
		t.Fatalf("the idempotency hold without the seams: %d", r.StatusCode)
	}
	_, base := startDevInProcess(t, "--emulator", "moto", "--api-key", key+"=acme", "--conformance-seams")
	for _, mode := range []string{"after-accept", "during-execution"} {
		r, m := testutil.DoJSON(t, "POST", base+"/host/durability/kill", `{"mode":"`+mode+`"}`, "Authorization", testutil.Bearer(key))
		if r.StatusCode != 409 || m["error"] != "idemkit.durability_unsupervised" {
			t.Fatalf("%s unsupervised: %d %v", mode, r.StatusCode, m)
		}
	}
	for _, b := range []string{`{}`, `{"key":"k"}`, `{"key":"","holdMs":1}`, `{"key":"k","holdMs":60001}`, `{"key":"k","holdMs":1,"x":1}`} {
		if r, m := testutil.DoJSON(t, "POST", base+"/conformance/seams/sample/test/idempotency/hold", b, "Authorization", testutil.Bearer(key)); r.StatusCode != 400 || m["error"] != "validation_error" {
			t.Fatalf("idempotency hold %s: %d %v", b, r.StatusCode, m)
		}
	}
	if r, _ := testutil.DoJSON(t, "GET", base+"/.well-known/openwop", ""); r.StatusCode != 200 {
		t.Fatalf("the stack did not survive: %d", r.StatusCode)
	}
}
