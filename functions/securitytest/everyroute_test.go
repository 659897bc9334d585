package securitytest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestNoSecretInLogsOnEveryRouteUnderStoreFaults drives every route of the
// api function (apifn.Routes), wired by the kit on DynamoDB (moto) as
// deployed (apifn.ConfigFromKit), each request carrying a recognisable
// API key in its Authorization header, Idempotency-Key and body, while
// each DynamoDB operation the routes use fails once (each met by a
// call: GetItem, PutItem, UpdateItem, Query, TransactWriteItems), with a
// ValidationException or an InternalServerError whose message quotes
// every value the call sent; then malformed bodies, ids, queries and
// Idempotency-Keys carrying the same secrets. No log line and no error
// answer carries the API key, an Idempotency-Key, a record id, a run input
// or a webhook URL's path or query token.
func TestNoSecretInLogsOnEveryRouteUnderStoreFaults(t *testing.T) {
	everyRouteUnderStoreFaults(t, idem.Policy{}, nil, func(n int) string { return fmt.Sprintf("%s-every-route-key-%05d", marker, n) })
}

// TestNoCommerceKeyInLogsOnEveryRouteUnderStoreFaults is
// TestNoSecretInLogsOnEveryRouteUnderStoreFaults under the commerce
// policy, whose keys are any UTF-8 text without control characters: each
// Idempotency-Key holds a quote, a backslash, HTML's special characters
// and non-ASCII letters, which a log line or an error text would escape
// (so a search for the raw key alone would miss them); the search is for
// the marker every key holds, in whatever form.
func TestNoCommerceKeyInLogsOnEveryRouteUnderStoreFaults(t *testing.T) {
	attrs := map[string]any{commerce.CredentialNamespace: "shop", commerce.CredentialWorker: "checkout"}
	everyRouteUnderStoreFaults(t, commerce.Policy, attrs, func(n int) string {
		return fmt.Sprintf(`%s "quoted" \back <b>&amp; ünïcödé 日本 %05d`, marker, n)
	})
}

// everyRouteUnderStoreFaults is the every-route attack under policy (the
// default when zero), the authorizer's context carrying attrs beside the
// tenant, the n-th request's Idempotency-Key being keyOf(n).
func everyRouteUnderStoreFaults(t *testing.T, policy idem.Policy, attrs map[string]any, keyOf func(n int) string) {
	e := dynamotest.Start(t, dynamotest.Moto)
	env := settings.Env{
		Idem:          idemenv.Env{Enabled: true, Table: e.CreateTable(t, "IdempotencyTable"), Policy: policy},
		RunsTable:     e.CreateTable(t, "RunsTable"),
		EffectsTable:  e.CreateTable(t, "EffectsTable"),
		CrossRegion:   settings.CrossRegionSingle,
		Webhook:       webhook.WebhookPolicy{},
		Transactional: true, EffectLease: time.Minute, EffectRetention: 14 * 24 * time.Hour,
		PollMaxWait: time.Second,
	}
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	faults := &quotingFaults{}
	k, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(dynamotest.FastRetries, faults.middleware),
		Parts: kit.Parts{Runs: true, Guard: true, Ledger: true}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	api, err := apifn.New(apifn.ConfigFromKit(k))
	if err != nil {
		t.Fatal(err)
	}
	const apiKey = "idk_" + marker + "-api-key-in-the-authorization-header"
	const urlToken = marker + "-url-token"
	var keys []string
	n := 0
	call := func(method, path, body string, hdr map[string]string) events.APIGatewayV2HTTPResponse {
		n++
		h := map[string]string{"authorization": "Bearer " + apiKey}
		if method == http.MethodPost {
			key := keyOf(n)
			keys = append(keys, key)
			h["idempotency-key"] = key
		}
		if body != "" {
			h["content-type"] = "application/json"
		}
		for k, v := range hdr {
			h[k] = v
		}
		raw, query, _ := strings.Cut(path, "?")
		ev := events.APIGatewayV2HTTPRequest{RawPath: raw, RawQueryString: query, Body: body, Headers: h}
		ev.RequestContext.HTTP.Method = method
		ev.RequestContext.HTTP.Path = raw
		ev.RequestContext.DomainName = "api.example.com"
		ev.RequestContext.RequestID = fmt.Sprintf("req-%d", n)
		lambda := map[string]any{authfn.ContextTenantKey: tenant}
		for k, v := range attrs {
			lambda[k] = v
		}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: lambda}
		if query != "" {
			ev.QueryStringParameters = map[string]string{}
			for _, kv := range strings.Split(query, "&") {
				k, v, _ := strings.Cut(kv, "=")
				ev.QueryStringParameters[k] = v
			}
		}
		r, err := api.Handle(context.Background(), ev)
		if err != nil {
			t.Fatalf("%s %s: Handle returned %v", method, path, err)
		}
		if r.StatusCode >= 400 && strings.Contains(r.Body, marker) {
			t.Errorf("%s %s: the error answer echoes a secret: %d %s", method, path, r.StatusCode, r.Body)
		}
		return r
	}
	create := func() runs.Run {
		body := `{"workflowId":"webhook","inputs":{"url":"https://hooks.example.com/p/` + urlToken + `?t=` + urlToken +
			`","payload":{"x":"` + inputSec + `"}}}`
		r := call(http.MethodPost, "/runs", body, nil)
		var m map[string]any
		_ = json.Unmarshal([]byte(r.Body), &m)
		id, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || id == "" {
			t.Fatalf("createRun: %d %s", r.StatusCode, r.Body)
		}
		run, err := k.Runs.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	ctx := context.Background()
	// A failed run (retry, fork), a running one (a stale cancel waiting in
	// the inbox), another (pause, resume), and the inbox entry.
	failed := create()
	if _, err := k.Runs.Transition(ctx, failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", time.Now()); err != nil {
		t.Fatal(err)
	}
	running := create()
	if _, err := k.Runs.Transition(ctx, running.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	// A running run no cancel reaches: paused and resumed.
	pausable := create()
	if _, err := k.Runs.Transition(ctx, pausable.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	entry := func() string {
		r := call(http.MethodPost, "/runs/"+runs.ProjectID(running.ID)+"/cancel", `{"reason":"`+inputSec+`"}`,
			map[string]string{"idempotency-decided-version": "1"})
		var m map[string]any
		_ = json.Unmarshal([]byte(r.Body), &m)
		d, _ := m["details"].(map[string]any)
		id, _ := d["inboxId"].(string)
		if r.StatusCode != http.StatusConflict || id == "" {
			t.Fatalf("the stale cancel: %d %s", r.StatusCode, r.Body)
		}
		return id
	}
	inboxID := entry()

	pid := func(r runs.Run) string { return runs.ProjectID(r.ID) }
	requests := []struct{ method, path, body string }{
		{"POST", "/runs", `{"workflowId":"conformance-noop","inputs":{"x":"` + inputSec + `"}}`},
		{"GET", "/runs/" + pid(failed), ""},
		{"HEAD", "/runs/" + pid(failed), ""},
		{"POST", "/runs/" + pid(running) + "/cancel", `{"reason":"` + inputSec + `"}`},
		{"POST", "/runs/" + pid(failed) + "/retry", ""},
		{"POST", "/runs/" + pid(failed) + ":fork", `{"mode":"replay"}`},
		{"POST", "/runs:bulk-cancel", `{"runIds":["` + running.ID + `","` + failed.ID + `","` + tenant + `/` + marker + `-0123456789abcdef"],"reason":"` + inputSec + `"}`},
		{"GET", "/inbox", ""},
		{"POST", "/inbox/" + inboxID + "/resubmit", ""},
		{"POST", "/inbox/" + inboxID + "/discard", ""},
		{"GET", "/runs/" + pid(failed) + "/effects", ""},
		{"GET", "/runs/" + pid(failed) + "/events", ""},
		{"GET", "/runs/" + pid(failed) + "/events/poll?timeout=1", ""},
		{"GET", "/host/effect-seams", ""},
		{"POST", apifn.LiveWorkOrderPath, `{"work_order_number":"WO-` + inputSec + `","projects":[{"code":"P-1","name":"` + inputSec + `","quantity":2}]}`},
		{"POST", "/runs/" + pid(pausable) + ":pause", `{"reason":"` + inputSec + `","drainPolicy":"immediate"}`},
		{"POST", "/runs/" + pid(pausable) + ":resume", `{"reason":"` + inputSec + `"}`},
		{"HEAD", "/inbox", ""},
		{"HEAD", "/runs/" + pid(failed) + "/effects", ""},
		{"HEAD", "/runs/" + pid(failed) + "/events", ""},
		{"HEAD", "/runs/" + pid(failed) + "/events/poll?timeout=1", ""},
		{"HEAD", "/host/effect-seams", ""},
	}
	// Every authorized route of the table is among them: a route added
	// later is attacked here too, or this fails.
	for _, r := range apifn.Routes {
		if r.Public {
			continue
		}
		met := false
		for _, rq := range requests {
			m, _, found, _ := apifn.MatchRoute(rq.method, strings.SplitN(rq.path, "?", 2)[0])
			met = met || found && m.Route.Op == r.Op && rq.method == r.Method
		}
		if !met {
			t.Errorf("route %s %s (%s) is not attacked: add a request for it", r.Method, r.Pattern, r.Op)
		}
	}
	statuses := map[string]map[int]int{}
	hit := map[string]int{} // the faults that met a call, by operation
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "TransactWriteItems", "BatchGetItem"} {
		for _, code := range []string{"ValidationException", "InternalServerError"} {
			for _, rq := range requests {
				faults.arm(op, code, 1)
				r := call(rq.method, rq.path, rq.body, nil)
				if faults.left() == 0 {
					hit[op]++
				}
				faults.arm("", "", 0)
				name := rq.method + " " + rq.path
				if statuses[name] == nil {
					statuses[name] = map[int]int{}
				}
				statuses[name][r.StatusCode]++
			}
			// The inbox entry may have been decided: queue another.
			inboxID = entry()
			for i := range requests {
				if strings.HasPrefix(requests[i].path, "/inbox/") {
					verb := requests[i].path[strings.LastIndexByte(requests[i].path, '/'):]
					requests[i].path = "/inbox/" + inboxID + verb
				}
			}
		}
	}
	t.Logf("statuses: %v", statuses)
	// Every operation these routes call in this wiring met its fault.
	// DeleteItem and BatchGetItem are armed too, and meet no call here
	// (a transactional inbox decides in a transaction; the failed run
	// has no effects to batch-read): they are not counted as attacked.
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "Query", "TransactWriteItems"} {
		if hit[op] == 0 {
			t.Errorf("no route's call of %s met its fault: that operation was not attacked", op)
		}
	}
	// Malformed input on the same routes, no fault: refused, and neither
	// logged nor echoed.
	for _, rq := range []struct{ method, path, body string }{
		{"POST", "/runs", marker + "-not-json"},
		{"POST", "/runs", `{"workflowId":"` + marker + `-no-such-workflow"}`},
		{"POST", "/runs", `{"workflowId":"webhook","inputs":{"url":"http://169.254.169.254/` + urlToken + `?t=` + urlToken + `"}}`},
		{"POST", "/runs", `{"workflowId":"webhook","inputs":{"url":"https://` + marker + `.example.com:99999/` + urlToken + `"}}`},
		{"POST", "/runs", `{"workflowId":"conformance-noop","inputs":{"x":"` + inputSec + `"},"tenantId":"` + marker + `"}`},
		{"POST", "/runs/" + pid(running) + "/cancel", `{"reason":["` + inputSec + `"]}`},
		{"POST", "/runs:bulk-cancel", `{"runIds":["` + marker + `"],"reason":"` + inputSec + `"}`},
		{"POST", "/runs:bulk-cancel", `{"runIds":["` + running.ID + `"],"reason":["` + inputSec + `"]}`},
		{"POST", "/runs/" + pid(failed) + ":fork", `{"mode":"` + marker + `"}`},
		{"POST", "/runs/" + pid(failed) + ":fork", `{"mode":"replay","runOptionsOverlay":"` + inputSec + `"}`},
		{"GET", "/runs/" + marker + "~2F" + marker + "-0123456789abcdef", ""},
		{"GET", "/runs/" + pid(failed) + "/events/poll?afterSequence=" + marker, ""},
		{"POST", "/inbox/" + marker + "/discard", ""},
	} {
		call(rq.method, rq.path, rq.body, nil)
	}
	for _, bad := range []string{marker + "\x00short", marker + strings.Repeat("k", 200), marker + "-é-non-ascii-key-0123456789"} {
		call(http.MethodPost, "/runs", `{"workflowId":"conformance-noop","inputs":{"x":"`+inputSec+`"}}`, map[string]string{"idempotency-key": bad})
	}

	out := logs.String()
	if !strings.Contains(out, "One or more parameter values were invalid") {
		t.Fatalf("no store error was logged: the test proves nothing\n%s", out)
	}
	for _, key := range keys {
		if i := strings.Index(out, key); i >= 0 {
			t.Errorf("the logs carry the Idempotency-Key %s: ...%s...", key, out[max(0, i-300):min(len(out), i+100)])
		}
	}
	if i := strings.Index(out, keyspace.CallerPrefix); i >= 0 {
		t.Errorf("the logs carry a record id: ...%s...", out[max(0, i-300):min(len(out), i+100)])
	}
	if i := strings.Index(out, marker); i >= 0 {
		t.Errorf("the logs carry a secret: ...%s...", out[max(0, i-300):min(len(out), i+100)])
	}
}
