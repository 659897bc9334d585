package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestDevWireSchemasOfForkPollAndHostRoutes drives the routes
// TestDevWireSchemas leaves out through every outcome a client can reach,
// each answer checked against the closed v2 schema the OpenAPI document
// names for it (the generic error envelope for a status it does not list):
// pollRunEvents (200 with and without a cursor, past the end, 400 for each
// bad parameter, 401, 403, 404, HEAD), forkRun (201 replay and branch, a
// keyed replay, 400 for each body outside its grammar, 401, 403, 404, 405,
// 409 key mismatch, 413, 415, 422 past the log), every fork read back
// (snapshot, events in two modes, poll, effects, and a fork of the fork),
// a cancelled run's events with and without a reason, getEffectSeamManifest
// (200, 401), and the error answers of the host's own routes outside the
// contract (retry, inbox), which must be the v2 envelope. A retry's 201,
// outside the contract, names its source. Concurrent requests under one
// key create one fork and one retry.
func TestDevWireSchemasOfForkPollAndHostRoutes(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("wirer%d-", time.Now().UnixNano())
	const keyA, keyB = "idk_wire-a-0123456789abcdef", "idk_wire-b-0123456789abcdef"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--idempotency-wait", "2s",
		"--api-key", keyA+"=acme", "--api-key", keyB+"=globex", "--allow-loopback-webhooks")
	c := &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}

	done := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`)
	p := "/runs/" + runs.ProjectID(done.json["runId"].(string))
	waitTerminal(t, c, p, keyA)
	rx400, _ := receiver(t, 400)
	failed := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"webhook","inputs":{"url":"`+rx400.URL+`"}}`)
	fp := "/runs/" + runs.ProjectID(failed.json["runId"].(string))
	waitTerminal(t, c, fp, keyA)
	unknown := "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz"

	// pollRunEvents.
	for q, want := range map[string]int{
		"": 200, "?afterSequence=0": 200, "?afterSequence=99999999999999999999999": 200, "?timeout=60&streamMode=values": 200,
		"?afterSequence=-1": 400, "?afterSequence=x": 400, "?afterSequence=1.0": 400, "?afterSequence=1&afterSequence=2": 400,
		"?timeout=0": 400, "?timeout=61": 400, "?streamMode=bogus": 400, "?%zz": 400,
	} {
		if r := c.do("GET", "/runs/{runId}/events/poll", p+"/events/poll"+q, keyA, ""); r.status != want {
			t.Errorf("poll %s: %d %s", q, r.status, r.body)
		}
		c.do("HEAD", "/runs/{runId}/events/poll", p+"/events/poll"+q, keyA, "")
	}
	c.do("GET", "/runs/{runId}/events/poll", p+"/events/poll", "", "")
	c.do("GET", "/runs/{runId}/events/poll", p+"/events/poll", keyB, "")
	c.do("GET", "/runs/{runId}/events/poll", unknown+"/events/poll", keyA, "")

	// forkRun: every body outside the grammar, every refusal.
	for _, b := range []string{``, `null`, `[]`, `{}`, `{"mode":"x"}`, `{"mode":null}`, `{"mode":"replay","x":1}`, `{"mode":"replay","fromSeq":"1"}`,
		`{"mode":"replay","fromSeq":1.5}`, `{"mode":"replay","fromSeq":-1}`, `{"mode":"replay","fromSeq":1e300}`, `{"mode":"branch"}`,
		`{"mode":"branch","fromSeq":0,"runOptionsOverlay":{"tags":["a"]}}`, `{"mode":"replay","runOptionsOverlay":5}`, `{"mode":"replay"} x`,
		`{"mode":"replay","mode":"branch"}`, strings.Repeat("[", 20000)} {
		if r := c.do("POST", "/runs/{runId}:fork", p+":fork", keyA, b); r.status != 400 {
			t.Errorf("fork %.40s: %d %s", b, r.status, r.body)
		}
	}
	if r := c.do("POST", "/runs/{runId}:fork", p+":fork", keyA, `{"mode":"replay","fromSeq":99}`); r.status != 422 || r.json["error"] != "fork_point_invalid" {
		t.Errorf("fork past the log: %d %s", r.status, r.body)
	}
	c.do("POST", "/runs/{runId}:fork", p+":fork", keyA, `{"mode":"replay"}`, "Content-Type", "text/plain")
	c.do("POST", "/runs/{runId}:fork", p+":fork", keyA, `{"mode":"replay","pad":"`+strings.Repeat("x", 300000)+`"}`)
	c.do("POST", "/runs/{runId}:fork", unknown+":fork", keyA, `{"mode":"replay"}`)
	c.do("POST", "/runs/{runId}:fork", p+":fork", keyB, `{"mode":"replay"}`)
	c.do("POST", "/runs/{runId}:fork", p+":fork", "", `{"mode":"replay"}`)
	c.do("GET", "/runs/{runId}:fork", p+":fork", keyA, "")
	fk := "wire-" + client.NewKey()
	first := c.do("POST", "/runs/{runId}:fork", p+":fork", keyA, `{"mode":"replay"}`, "Idempotency-Key", fk)
	if r := c.do("POST", "/runs/{runId}:fork", p+":fork", keyA, `{"mode":"replay"}`, "Idempotency-Key", fk); r.json["runId"] != first.json["runId"] {
		t.Errorf("fork replay: %s / %s", first.body, r.body)
	}
	if r := c.do("POST", "/runs/{runId}:fork", p+":fork", keyA, `{"mode":"branch","fromSeq":1}`, "Idempotency-Key", fk); r.status != 409 || r.json["error"] != "idempotency_key_mismatch" {
		t.Errorf("fork key mismatch: %d %s", r.status, r.body)
	}

	// Every fork of a completed and a failed source, read back, and a fork
	// of each fork.
	var forks []string
	for _, src := range []string{p, fp} {
		for _, b := range []string{`{"mode":"replay"}`, `{"mode":"replay","fromSeq":1}`, `{"mode":"branch","fromSeq":0,"runOptionsOverlay":{}}`, `{"mode":"branch","fromSeq":1}`} {
			r := c.do("POST", "/runs/{runId}:fork", src+":fork", keyA, b)
			if r.status != 201 {
				t.Fatalf("fork %s %s: %d %s", src, b, r.status, r.body)
			}
			forks = append(forks, "/runs/"+runs.ProjectID(r.json["runId"].(string)))
		}
	}
	for i, k := range forks {
		waitTerminal(t, c, k, keyA)
		c.do("GET", "/runs/{runId}/events", k+"/events", keyA, "")
		c.do("GET", "/runs/{runId}/events", k+"/events?streamMode=values", keyA, "")
		c.do("GET", "/runs/{runId}/events/poll", k+"/events/poll", keyA, "")
		c.do("GET", "/runs/{runId}/effects", k+"/effects", keyA, "")
		if i%2 == 0 {
			r := c.do("POST", "/runs/{runId}:fork", k+":fork", keyA, `{"mode":"replay"}`)
			kk := "/runs/" + runs.ProjectID(r.json["runId"].(string))
			waitTerminal(t, c, kk, keyA)
			c.do("GET", "/runs/{runId}/events", kk+"/events", keyA, "")
			c.do("GET", "/runs/{runId}/events/poll", kk+"/events/poll", keyA, "")
		}
	}

	// A cancelled run's events, with and without a reason.
	for _, reason := range []string{``, `{}`, `{"reason":""}`, `{"reason":"operator stop"}`} {
		r := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"webhook","inputs":{"url":"http://127.0.0.1:9/"}}`)
		cp := "/runs/" + runs.ProjectID(r.json["runId"].(string))
		if r := c.do("POST", "/runs/{runId}/cancel", cp+"/cancel", keyA, reason); r.status != 200 {
			t.Fatalf("cancel %s: %d %s", reason, r.status, r.body)
		}
		waitTerminal(t, c, cp, keyA)
		c.do("GET", "/runs/{runId}/events", cp+"/events?streamMode=debug", keyA, "")
		c.do("GET", "/runs/{runId}/events", cp+"/events?streamMode=values", keyA, "")
		c.do("GET", "/runs/{runId}/events/poll", cp+"/events/poll", keyA, "")
	}

	// getEffectSeamManifest.
	c.do("GET", "/host/effect-seams", "/host/effect-seams", keyA, "")
	c.do("GET", "/host/effect-seams", "/host/effect-seams", "", "")

	// The host's own routes: every refusal is the envelope.
	for _, rq := range []struct {
		path, key, body string
		want            int
	}{
		{p + "/retry", keyA, "", 409}, {unknown + "/retry", keyA, "", 404}, {fp + "/retry", keyB, "", 403}, {fp + "/retry", "", "", 401},
		{fp + "/retry", keyA, "not json", 400}, {"/inbox/x/resubmit", keyA, "", 404}, {"/inbox/x/discard", keyA, "", 404},
		{"/inbox/" + strings.Repeat("a", 5000) + "/discard", keyA, "", 404}, {"/inbox/x/discard", "", "", 401},
	} {
		if r := c.do("POST", "", rq.path, rq.key, rq.body); r.status != rq.want {
			t.Errorf("POST %.60s: %d %s", rq.path, r.status, r.body)
		}
	}
	if r := c.do("GET", "", "/inbox", "", ""); r.status != 401 {
		t.Errorf("GET /inbox without a key: %d", r.status)
	}

	// Concurrent requests under one key: one fork, one retry.
	for _, op := range []struct{ tmpl, path, body string }{
		{"/runs/{runId}:fork", fp + ":fork", `{"mode":"replay"}`},
		{"", fp + "/retry", ""},
	} {
		key := "wire-" + client.NewKey()
		var wg sync.WaitGroup
		var mu sync.Mutex
		ids := map[string]int{}
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := postKeyed(t, base+op.path, keyA, key, op.body)
				var v map[string]any
				_ = json.Unmarshal(body, &v)
				mu.Lock()
				defer mu.Unlock()
				if status != 201 || (op.tmpl == "" && v["retryOf"] != failed.json["runId"]) {
					t.Errorf("%s under one key: %d %s", op.path, status, body)
				}
				ids[fmt.Sprint(v["runId"])]++
			}()
		}
		wg.Wait()
		if len(ids) != 1 {
			t.Errorf("%s under one key named %d runs: %v", op.path, len(ids), ids)
		}
	}

	for _, want := range []string{
		"GET /runs/{runId}/events/poll 200", "GET /runs/{runId}/events/poll 400", "GET /runs/{runId}/events/poll 401",
		"GET /runs/{runId}/events/poll 403", "GET /runs/{runId}/events/poll 404", "HEAD /runs/{runId}/events/poll 200",
		"POST /runs/{runId}:fork 201", "POST /runs/{runId}:fork 400", "POST /runs/{runId}:fork 401", "POST /runs/{runId}:fork 403",
		"POST /runs/{runId}:fork 404", "POST /runs/{runId}:fork 409", "POST /runs/{runId}:fork 413", "POST /runs/{runId}:fork 415",
		"POST /runs/{runId}:fork 422", "GET /runs/{runId}:fork 405", "GET /host/effect-seams 200", "GET /host/effect-seams 401",
		"POST  400", "POST  401", "POST  403", "POST  404", "POST  409", "GET  401",
	} {
		if !c.seen[want] {
			t.Errorf("never reached %q", want)
		}
	}
}

// postKeyed sends a keyed POST outside the contract's routes and returns
// its status and body.
func postKeyed(t *testing.T, url, apiKey, idemKey, body string) (int, []byte) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", idemKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
