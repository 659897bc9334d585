package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger/semantic"
)

// wireClient sends requests to a dev server and checks every response
// against the schema ../shared/openwop/api/v2/openapi.yaml names for it.
type wireClient struct {
	t      *testing.T
	o      *wireschema.Oracle
	base   string
	mu     sync.Mutex
	seen   map[string]bool // "METHOD template status" checked
	counts int
}

type wireResp struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

// do sends one request. template is the OpenAPI path template the request
// hits ("" for a path the contract does not have: only an error envelope is
// acceptable there).
func (c *wireClient) do(method, template, path, key, body string, hdr ...string) wireResp {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r := wireResp{status: resp.StatusCode, header: resp.Header, body: b}
	_ = json.Unmarshal(b, &r.json)
	c.check(method, template, r)
	return r
}

// check validates one response: every response carries OpenWOP-Version;
// a JSON body against the schema the contract names (an error envelope for
// any status >= 400 it does not list); an SSE body frame by frame; HEAD
// responses have no body.
func (c *wireClient) check(method, template string, r wireResp) {
	c.t.Helper()
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %s %d", method, template, r.status)] = true
	c.counts++
	c.mu.Unlock()
	if v := r.header.Get("OpenWOP-Version"); v != settings.ProtocolVersion {
		c.t.Errorf("%s %s %d: OpenWOP-Version %q", method, template, r.status, v)
	}
	if method == http.MethodHead {
		if len(r.body) != 0 {
			c.t.Errorf("HEAD %s answered a body: %q", template, r.body)
		}
		return
	}
	if template != "" {
		if bodiless, err := c.o.Bodiless(method, template, r.status); err == nil && bodiless {
			if len(r.body) != 0 {
				c.t.Errorf("%s %s %d answered a body the contract lists none for: %q", method, template, r.status, r.body)
			}
			return
		}
	}
	ct := r.header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		c.checkSSE(template, r)
		return
	}
	lookup := template
	if lookup == "" {
		if r.status < 400 {
			c.t.Errorf("%s (outside the contract) answered %d", method, r.status)
			return
		}
		lookup = "/runs/{runId}" // any route: an unlisted status is the generic envelope
	}
	sch, where, err := c.o.Response(method, lookup, r.status)
	if err != nil {
		c.t.Errorf("%s %s %d: %v (body %s)", method, template, r.status, err, r.body)
		return
	}
	if !strings.HasPrefix(ct, "application/json") {
		c.t.Errorf("%s %s %d: Content-Type %q, body %q", method, template, r.status, ct, r.body)
	}
	if err := wireschema.Validate(sch, r.body); err != nil {
		c.t.Errorf("%s %s %d does not validate against %s: %v\n%s", method, template, r.status, where, err, r.body)
	}
}

// checkSSE validates each `data:` of a streamRunEvents body: a RunEventDoc
// (run-event.schema.json) per event, an array of them for `event: batch`,
// the run snapshot for `event: state.snapshot` (values mode).
func (c *wireClient) checkSSE(template string, r wireResp) {
	c.t.Helper()
	if template != "/runs/{runId}/events" || r.status != http.StatusOK {
		c.t.Errorf("%s %d served text/event-stream", template, r.status)
		return
	}
	evSchema, err := c.o.Schema("run-event.schema.json")
	if err != nil {
		c.t.Fatal(err)
	}
	snapSchema, _, err := c.o.Response(http.MethodGet, "/runs/{runId}", http.StatusOK)
	if err != nil {
		c.t.Fatal(err)
	}
	event, frames := "", 0
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			frames++
			data := []byte(strings.TrimPrefix(line, "data: "))
			switch event {
			case "state.snapshot":
				err = wireschema.Validate(snapSchema, data)
			case "batch":
				var arr []json.RawMessage
				if err = json.Unmarshal(data, &arr); err == nil {
					for _, e := range arr {
						if err = wireschema.Validate(evSchema, e); err != nil {
							break
						}
					}
				}
			default:
				err = wireschema.Validate(evSchema, data)
			}
			if err != nil {
				c.t.Errorf("SSE frame %q does not validate: %v\n%s", event, err, data)
			}
		}
	}
	if frames == 0 {
		c.t.Errorf("events stream without a data frame: %q", r.body)
	}
}

// rawRequest writes bytes on a fresh connection and returns the response
// (net/http's own parsing errors never reach a handler).
func (c *wireClient) rawRequest(raw string) wireResp {
	c.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	go func() { _, _ = io.WriteString(conn, raw) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.t.Fatalf("raw request %.40q: %v", raw, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := wireResp{status: resp.StatusCode, header: resp.Header, body: b}
	_ = json.Unmarshal(b, &r.json)
	return r
}

// receiver is a webhook destination counting deliveries.
func receiver(t *testing.T, status int) (*httptest.Server, func() int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestDevWireSchemas drives every route `idemkit dev` serves through every
// outcome a client can reach — POST /runs (201, replay, 400, 401, 409
// mismatch and in flight, 413, 415, 503), GET/HEAD /runs/{runId} (200, 400,
// 401, 403, 404, 405), POST /runs/{runId}/cancel (200, replay, 409
// run_terminal, 404), GET /runs/{runId}/effects (empty, with rows, 404), GET
// /runs/{runId}/events (updates, values, batch, 400 stream mode, resume), GET
// /.well-known/openwop, GET /openapi.json, an unknown path, and net/http's own refusals (a 2 MB
// header, a NUL in a header, a malformed path escape) — and validates each
// response against the real closed v2 schema the OpenAPI document names for
// it (internal/wireschema). A run stored by an earlier version with status
// "succeeded" is read, streamed and cancelled as "completed".
func TestDevWireSchemas(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("wire%d-", time.Now().UnixNano())
	const keyA, keyB = "idk_wire-a-0123456789abcdef", "idk_wire-b-0123456789abcdef"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--idempotency-wait", "300ms",
		"--api-key", keyA+"=acme", "--api-key", keyB+"=globex", "--allow-loopback-webhooks")
	c := &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}

	// Discovery: the closed root, no credential.
	caps := c.do("GET", "/.well-known/openwop", "/.well-known/openwop", "", "")
	if caps.status != 200 || caps.json["host"] != nil || caps.json["conformance"] != nil {
		t.Fatalf("discovery: %d %s", caps.status, caps.body)
	}
	c.do("POST", "/.well-known/openwop", "/.well-known/openwop", "", "")
	// The host's own OpenAPI document, no credential.
	if r := c.do("GET", "/openapi.json", "/openapi.json", "", ""); r.status != 200 || r.json["openapi"] == nil {
		t.Fatalf("openapi.json: %d %.200s", r.status, r.body)
	}

	// createRun.
	key := "wire-" + client.NewKey()
	first := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", key)
	replay := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", key)
	if first.status != 201 || replay.status != 201 || replay.header.Get("OpenWOP-Idempotent-Replay") != "true" || replay.json["runId"] != first.json["runId"] {
		t.Fatalf("create/replay: %d %s / %d %s", first.status, first.body, replay.status, replay.body)
	}
	if r := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-delay"}`, "Idempotency-Key", key); r.status != 409 {
		t.Fatalf("mismatch: %d %s", r.status, r.body)
	}
	for _, b := range []string{`{}`, `not json`, `{"workflowId":"nope"}`} {
		if r := c.do("POST", "/runs", "/runs", keyA, b); r.status != 400 {
			t.Fatalf("%s: %d", b, r.status)
		}
	}
	if r := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", "bad key with spaces"); r.status != 400 || r.json["error"] != "idempotency_key_invalid" {
		t.Fatalf("bad key: %d %s", r.status, r.body)
	}
	c.do("POST", "/runs", "/runs", "", `{"workflowId":"conformance-noop"}`)
	c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-unavailable"}`)
	c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"webhook","inputs":{"url":"http://169.254.169.254/"}}`)
	c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop","pad":"`+strings.Repeat("x", apifn.MaxBodyBytes)+`"}`)
	c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`, "Content-Type", "text/plain")
	c.do("GET", "/runs", "/runs", keyA, "")

	// An in-flight duplicate: 409 idempotency_in_flight. The seams'
	// idempotency hold (a dev with --conformance-seams on the same engine)
	// keeps whichever of two same-key creates claims first in flight until
	// the other has been answered (its wait budget is 300 ms), and is then
	// released: no timing decides which answer each gets.
	_, hbase := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix+"hold-", "--idempotency-wait", "300ms",
		"--api-key", keyA+"=acme", "--conformance-seams")
	hc := &wireClient{t: t, o: o, base: hbase, seen: map[string]bool{}}
	slowKey := "wire-" + client.NewKey()
	hold := func(ms int) {
		if r, _ := testutil.DoJSON(t, "POST", hbase+"/conformance/seams/sample/test/idempotency/hold", fmt.Sprintf(`{"key":%q,"holdMs":%d}`, slowKey, ms),
			"Authorization", testutil.Bearer(keyA)); r.StatusCode != 200 {
			t.Fatalf("hold %d: %d", ms, r.StatusCode)
		}
	}
	hold(60000)
	slow := make(chan wireResp, 2)
	for range 2 {
		go func() {
			slow <- hc.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", slowKey)
		}()
	}
	a := <-slow
	hold(0)
	b := <-slow
	if a.status != 409 || a.json["error"] != "idempotency_in_flight" || b.status != 201 {
		t.Fatalf("no in-flight refusal: %d %s / %d %s", a.status, a.body, b.status, b.body)
	}
	for k := range hc.seen {
		c.seen[k] = true
	}

	// getRun and its errors.
	id := first.json["runId"].(string)
	p := "/runs/" + runs.ProjectID(id)
	snap := waitTerminal(t, c, p, keyA)
	if snap.json["status"] != "completed" || snap.json["eventLogSchemaVersion"] != 3.0 {
		t.Fatalf("snapshot: %s", snap.body)
	}
	if r := c.do("HEAD", "/runs/{runId}", p, keyA, ""); r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("HEAD by the owner: %d %v", r.status, r.header)
	}
	if r := c.do("HEAD", "/runs/{runId}", p, "", ""); r.status != 401 {
		t.Fatalf("HEAD without a key: %d", r.status)
	}
	if r := c.do("HEAD", "/runs/{runId}", p, keyB, ""); r.status != 403 {
		t.Fatalf("HEAD by another tenant: %d", r.status)
	}
	// A conditional read: the current ETag (or its weak form) gets 304
	// with no body and the ETag; another tag gets the snapshot.
	for _, inm := range []string{snap.header.Get("ETag"), "W/" + snap.header.Get("ETag"), "*"} {
		if r := c.do("GET", "/runs/{runId}", p, keyA, "", "If-None-Match", inm); r.status != 304 || len(r.body) != 0 || r.header.Get("ETag") != snap.header.Get("ETag") {
			t.Fatalf("If-None-Match %s: %d %v %q", inm, r.status, r.header, r.body)
		}
	}
	if r := c.do("GET", "/runs/{runId}", p, keyA, "", "If-None-Match", `"other"`); r.status != 200 || r.json["runId"] != id {
		t.Fatalf("a non-matching If-None-Match: %d %s", r.status, r.body)
	}
	// A major this host does not serve: 406 on every route, the envelope
	// listing what it serves.
	for _, v := range []string{"1", "9"} {
		for _, rt := range [][3]string{{"GET", "/.well-known/openwop", "/.well-known/openwop"}, {"POST", "/runs", "/runs"}, {"GET", "/runs/{runId}", p}} {
			body := ""
			if rt[0] == "POST" {
				body = `{"workflowId":"conformance-noop"}`
			}
			r := c.do(rt[0], rt[1], rt[2], keyA, body, "OpenWOP-Version", v)
			d, _ := r.json["details"].(map[string]any)
			if pv, _ := d["protocolVersions"].([]any); r.status != 406 || r.json["error"] != "protocol_version_unsupported" || len(pv) != 1 || pv[0] != settings.ProtocolVersion {
				t.Fatalf("OpenWOP-Version %s on %s %s: %d %s", v, rt[0], rt[1], r.status, r.body)
			}
		}
	}
	c.do("GET", "/runs/{runId}", p, "", "")
	c.do("GET", "/runs/{runId}", p, keyB, "")
	c.do("GET", "/runs/{runId}", "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz", keyA, "")
	c.do("GET", "/runs/{runId}", "/runs/not-a-run-id", keyA, "")
	c.do("DELETE", "/runs/{runId}", p, keyA, "")
	c.do("GET", "", "/elsewhere", "", "")

	// cancelRun: a pending run is cancelled (and the key replays); a
	// finished run is 409 run_terminal.
	delayed := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"webhook","inputs":{"url":"http://127.0.0.1:9/"}}`)
	if delayed.status != 201 {
		t.Fatalf("webhook run: %d %s", delayed.status, delayed.body)
	}
	ck := "wire-" + client.NewKey()
	cp := "/runs/" + runs.ProjectID(delayed.json["runId"].(string)) + "/cancel"
	c1 := c.do("POST", "/runs/{runId}/cancel", cp, keyA, "", "Idempotency-Key", ck)
	c.do("POST", "/runs/{runId}/cancel", cp, keyA, "", "Idempotency-Key", ck)
	if c1.status != 200 && c1.status != 409 {
		t.Fatalf("cancel: %d %s", c1.status, c1.body)
	}
	if r := c.do("POST", "/runs/{runId}/cancel", p+"/cancel", keyA, ""); r.status != 409 || r.json["error"] != "run_terminal" {
		t.Fatalf("cancel a completed run: %d %s", r.status, r.body)
	}
	c.do("POST", "/runs/{runId}/cancel", "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz/cancel", keyA, "")
	c.do("GET", "/runs/{runId}/cancel", p+"/cancel", keyA, "")

	// Effects: an empty ledger, and one with an attempt row.
	c.do("GET", "/runs/{runId}/effects", p+"/effects", keyA, "")
	c.do("GET", "/runs/{runId}/effects", "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz/effects", keyA, "")
	rx, deliveries := receiver(t, 204)
	wh := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"webhook","inputs":{"url":"`+rx.URL+`","payload":{"n":1}}}`)
	wp := "/runs/" + runs.ProjectID(wh.json["runId"].(string))
	if s := waitTerminal(t, c, wp, keyA); s.json["status"] != "completed" || deliveries() != 1 {
		t.Fatalf("webhook run: %s, %d deliveries", s.body, deliveries())
	}
	if r := c.do("GET", "/runs/{runId}/effects", wp+"/effects", keyA, ""); len(r.json["effects"].([]any)) == 0 {
		t.Fatalf("no effect rows: %s", r.body)
	}

	// A failed run: error object on the snapshot, run.failed event.
	rx400, _ := receiver(t, 400)
	fr := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"webhook","inputs":{"url":"`+rx400.URL+`"}}`)
	fp := "/runs/" + runs.ProjectID(fr.json["runId"].(string))
	if s := waitTerminal(t, c, fp, keyA); s.json["status"] != "failed" || s.json["error"] == nil {
		t.Fatalf("failed run: %s", s.body)
	}

	// Events in every mode.
	for _, q := range []string{"", "?streamMode=values", "?streamMode=updates,debug", "?bufferMs=100", "?streamMode=all", "?bufferMs=99999"} {
		c.do("GET", "/runs/{runId}/events", p+"/events"+q, keyA, "")
		c.do("GET", "/runs/{runId}/events", fp+"/events"+q, keyA, "")
	}
	c.do("GET", "/runs/{runId}/events", p+"/events", keyA, "", "Last-Event-ID", "0")
	c.do("GET", "/runs/{runId}/events", p+"/events", keyA, "", "Last-Event-ID", "x")
	c.do("GET", "/runs/{runId}/events", p+"/events", keyB, "")

	// net/http's own refusals carry the envelope too.
	addr := strings.TrimPrefix(base, "http://")
	for name, raw := range map[string]string{
		"2 MB header":  "GET /runs/x HTTP/1.1\r\nHost: " + addr + "\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n",
		"NUL header":   "GET /runs/x HTTP/1.1\r\nHost: " + addr + "\r\nX-Nul: a\x00b\r\n\r\n",
		"bad escape":   "GET /runs/%zz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n",
		"no host":      "GET /runs/x HTTP/1.1\r\n\r\n",
		"bad expect":   "POST /runs HTTP/1.1\r\nHost: " + addr + "\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\n{}",
		"bad encoding": "POST /runs HTTP/1.1\r\nHost: " + addr + "\r\nTransfer-Encoding: gzip\r\n\r\n",
	} {
		r := c.rawRequest(raw)
		if r.status < 400 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %q %q", name, r.status, r.header.Get("Content-Type"), r.body)
		}
		c.check("GET", "", r)
	}

	// A run stored by an earlier version, status "succeeded": read,
	// streamed and refused a cancel exactly as a completed run.
	legacy := runs.NewRunID("acme")
	now := time.Now().UTC().Add(-time.Hour)
	cl := e.Client()
	if _, err := cl.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(prefix + "RunsTable"), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: legacy}, "tenant": &types.AttributeValueMemberS{Value: "acme"},
		"workflowId": &types.AttributeValueMemberS{Value: "conformance-noop"}, "status": &types.AttributeValueMemberS{Value: "succeeded"},
		"createdAt":              &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
		"updatedAt":              &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Second).UnixMilli(), 10)},
		"activityIdentityRecipe": &types.AttributeValueMemberS{Value: identity.ActivityRecipe},
		"semanticRequestRecipe":  &types.AttributeValueMemberS{Value: semantic.RecipeV2},
	}}); err != nil {
		t.Fatal(err)
	}
	lp := "/runs/" + runs.ProjectID(legacy)
	if r := c.do("GET", "/runs/{runId}", lp, keyA, ""); r.status != 200 || r.json["status"] != "completed" || r.json["completedAt"] == nil {
		t.Fatalf("legacy run: %d %s", r.status, r.body)
	}
	if r := c.do("GET", "/runs/{runId}/events", lp+"/events", keyA, ""); !strings.Contains(string(r.body), "event: run.completed") {
		t.Fatalf("legacy run events: %s", r.body)
	}
	if r := c.do("POST", "/runs/{runId}/cancel", lp+"/cancel", keyA, ""); r.status != 409 || r.json["error"] != "run_terminal" || !strings.Contains(r.json["message"].(string), "completed") {
		t.Fatalf("legacy run cancel: %d %s", r.status, r.body)
	}

	// Every route and outcome above was reached (so the list stays honest).
	for _, want := range []string{
		"GET /.well-known/openwop 200", "GET /openapi.json 200", "POST /runs 201", "POST /runs 400", "POST /runs 401", "POST /runs 409",
		"POST /runs 413", "POST /runs 415", "POST /runs 503", "GET /runs 404", "GET /runs/{runId} 200", "HEAD /runs/{runId} 200",
		"GET /runs/{runId} 304", "GET /runs/{runId} 406", "GET /.well-known/openwop 406", "POST /runs 406",
		"GET /runs/{runId} 400", "GET /runs/{runId} 401", "GET /runs/{runId} 403", "GET /runs/{runId} 404", "DELETE /runs/{runId} 405",
		"POST /runs/{runId}/cancel 200", "POST /runs/{runId}/cancel 409", "POST /runs/{runId}/cancel 404",
		"GET /runs/{runId}/effects 200", "GET /runs/{runId}/effects 404", "GET /runs/{runId}/events 200", "GET /runs/{runId}/events 400",
		"GET /runs/{runId}/events 403", "GET  404", "GET  431", "GET  400",
	} {
		if !c.seen[want] {
			t.Errorf("never reached %q", want)
		}
	}
}

// waitTerminal polls getRun (each answer schema-checked) until the run ends.
func waitTerminal(t *testing.T, c *wireClient, p, key string) wireResp {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang guard, not a speed limit
	for {
		r := c.do("GET", "/runs/{runId}", p, key, "")
		if s, _ := r.json["status"].(string); runs.Status(s).Terminal() {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not terminal: %s", p, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
