package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/testutil"
)

// rieFunction is the api bootstrap running under the RIE, bound to loopback.
type rieFunction struct {
	url  string
	proc *testutil.Process
	mu   sync.Mutex // one invocation at a time: the RIE crashes on overlapping ones
}

// startRIE builds the api function for the host architecture, creates its
// tables on moto and starts it under the RIE.
func startRIE(t testing.TB) (*rieFunction, time.Time) {
	t.Helper()
	e := dynamotest.Start(t, dynamotest.Moto)
	rie := rieBinary(t)
	dir := t.TempDir()
	boot := buildHost(t, dir, "bootstrap", "functions/api")
	ports := testutil.FreeAddrs(t, 2)
	addr, apiAddr := ports[0], ports[1]
	env := append(os.Environ(),
		"AWS_ACCESS_KEY_ID=idemkit", "AWS_SECRET_ACCESS_KEY=idemkit", "AWS_REGION="+e.Region, "AWS_EC2_METADATA_DISABLED=true",
		"DYNAMODB_ENDPOINT="+e.Endpoint,
		"IDEMPOTENCY_TABLE="+e.CreateTable(t, "IdempotencyTable"),
		"RUNS_TABLE="+e.CreateTable(t, "RunsTable"),
		"EFFECTS_TABLE="+e.CreateTable(t, "EffectsTable"),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
	)
	started := time.Now()
	p := start(t, env, rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", apiAddr, "--log-level", "error", boot)
	return &rieFunction{url: "http://" + addr + "/2015-03-31/functions/function/invocations", proc: p}, started
}

// invoke sends one event and waits for its answer. Invocations are never
// overlapped: the RIE crashes on concurrent ones.
func (f *rieFunction) invoke(t testing.TB, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(ev)
	resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(body, &out); err != nil || out.StatusCode == 0 {
		return out, fmt.Errorf("invoke: HTTP %d %s", resp.StatusCode, body)
	}
	return out, nil
}

// waitUp invokes the capabilities route until the function answers.
func (f *rieFunction) waitUp(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang guard: the loop ends at the first answer
	for {
		r, err := f.invoke(t, apiEvent("GET", "/.well-known/openwop", "", "", ""))
		if err == nil && r.StatusCode == 200 {
			return
		}
		if f.proc.Exited() || time.Now().After(deadline) {
			t.Fatalf("the api function did not come up under the RIE: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func apiEvent(method, path, tenant, key, body string) events.APIGatewayV2HTTPRequest {
	e := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: method + " " + path, RawPath: path, Body: body,
		Headers: map[string]string{"content-type": "application/json"}}
	e.RequestContext.HTTP.Method = method
	e.RequestContext.HTTP.Path = path
	e.RequestContext.DomainName = "api.example.com"
	e.RequestContext.RequestID = fmt.Sprintf("req-%d", time.Now().UnixNano())
	if key != "" {
		e.Headers["idempotency-key"] = key
	}
	if tenant != "" {
		e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": tenant}}
	}
	return e
}

// TestAPIBootstrapUnderRIE: two createRun calls with the same key through
// the real bootstrap binary return one run, the second marked as a replay.
func TestAPIBootstrapUnderRIE(t *testing.T) {
	f, _ := startRIE(t)
	f.waitUp(t)
	key := fmt.Sprintf("rie-%d-0123456789abcdef", time.Now().UnixNano())
	body := `{"workflowId":"conformance-noop","inputs":{}}`
	r1, err := f.invoke(t, apiEvent("POST", "/runs", "acme", key, body))
	must(t, err)
	r2, err := f.invoke(t, apiEvent("POST", "/runs", "acme", key, body))
	must(t, err)
	var m1, m2 map[string]any
	_ = json.Unmarshal([]byte(r1.Body), &m1)
	_ = json.Unmarshal([]byte(r2.Body), &m2)
	if r1.StatusCode != 201 || r2.StatusCode != 201 || m1["runId"] == nil || m1["runId"] != m2["runId"] {
		t.Fatalf("%d %s / %d %s", r1.StatusCode, r1.Body, r2.StatusCode, r2.Body)
	}
	if header.First(r1.Headers, "OpenWOP-Idempotent-Replay") != "" || header.First(r2.Headers, "OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("replay markers: %v / %v", r1.Headers, r2.Headers)
	}
	// The run is there, readable by its tenant only.
	id := m1["runId"].(string)
	g, err := f.invoke(t, apiEvent("GET", "/runs/"+strings.ReplaceAll(id, "/", "~2F"), "acme", "", ""))
	must(t, err)
	if g.StatusCode != 200 || !strings.Contains(g.Body, id) {
		t.Fatalf("getRun %d %s", g.StatusCode, g.Body)
	}
	o, err := f.invoke(t, apiEvent("GET", "/runs/"+strings.ReplaceAll(id, "/", "~2F"), "globex", "", ""))
	must(t, err)
	if o.StatusCode != 403 || strings.Contains(o.Body, id) {
		t.Fatalf("other tenant: %d %s", o.StatusCode, o.Body)
	}
}
