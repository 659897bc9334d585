package kit_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/semantic"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestWiringAndLeastPrivilege wires the kit exactly as the functions do,
// runs every route and a webhook run against moto, and checks that each
// function only calls DynamoDB actions its template.yaml role grants.
func TestWiringAndLeastPrivilege(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	env := settings.Env{
		Idem:          idemenv.Env{Enabled: true, Table: e.CreateTable(t, "IdempotencyTable")},
		RunsTable:     e.CreateTable(t, "RunsTable"),
		EffectsTable:  e.CreateTable(t, "EffectsTable"),
		APIKeysTable:  e.CreateTable(t, "ApiKeysTable"),
		CrossRegion:   settings.CrossRegionSingle,
		Webhook:       webhook.WebhookPolicy{AllowLoopback: true},
		Transactional: true, EffectLease: time.Minute, EffectRetention: 14 * 24 * time.Hour,
	}
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx := context.Background()

	// authorizer
	logical := map[string]string{"IdempotencyTable": env.Idem.Table, "RunsTable": env.RunsTable,
		"EffectsTable": env.EffectsTable, "ApiKeysTable": env.APIKeysTable}
	authUse := newTableUse(logical)
	keys := &apikeys.DynamoKeys{Client: e.Client(authUse.Middleware()), Table: env.APIKeysTable}
	if err := (&apikeys.DynamoKeys{Client: e.Client(), Table: env.APIKeysTable}).PutKey(ctx, "k-secret", "acme"); err != nil {
		t.Fatal(err)
	}
	if tn, err := (&authfn.Handler{Keys: keys, Logger: quiet}).Authorize(ctx, "Bearer k-secret"); err != nil || tn != "acme" {
		t.Fatal(tn, err)
	}
	checkGranted(t, "AuthorizerRole", authUse, "ApiKeysTable")
	checkAllUsed(t, "AuthorizerRole", authUse, "ApiKeysTable")

	// api
	apiCnt, apiUse := dynamotest.NewCounter(), newTableUse(logical)
	k, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(apiCnt.Middleware(), apiUse.Middleware()), Parts: kit.Parts{Runs: true, Guard: true, Ledger: true}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api, err := apifn.New(apifn.Config{Runs: k.Runs, Guard: k.Guard, Ledger: k.Ledger, Webhook: env.Webhook, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// acme's webhook signing secret: the executor signs its deliveries
	// with it (RED_TEAM 340).
	rot, err := apikeys.RotateSigningSecret(ctx, e.Client(), env.APIKeysTable, "acme", "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var recvMu sync.Mutex
	var signed []bool
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		recvMu.Lock()
		signed = append(signed, verifiesUnder(rot.Secret, r.Header, b))
		recvMu.Unlock()
	}))
	defer recv.Close()
	call := func(method, path, key, body string) map[string]any {
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, Body: body, Headers: map[string]string{"content-type": "application/json"}}
		if key != "" {
			ev.Headers["idempotency-key"] = key
		}
		ev.RequestContext.HTTP.Method = method
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{authfn.ContextTenantKey: "acme"}}
		r, _ := api.Handle(ctx, ev)
		var m map[string]any
		_ = json.Unmarshal([]byte(r.Body), &m)
		if r.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, r.StatusCode, r.Body)
		}
		return m
	}
	key := "lp-0123456789abcdefghijkl"
	m := call("POST", "/runs", key, `{"workflowId":"webhook","inputs":{"url":"`+recv.URL+`","payload":1}}`)
	if again := call("POST", "/runs", key, `{"workflowId":"webhook","inputs":{"url":"`+recv.URL+`","payload":1}}`); again["runId"] != m["runId"] {
		t.Fatalf("replay gave another run: %v %v", m, again)
	}
	id := m["runId"].(string)
	p := "/runs/" + runs.ProjectID(id)

	// executor (runs the webhook node through the ledger)
	exUse := newTableUse(logical)
	var exLog syncBuffer
	exLogger := slog.New(slog.NewJSONHandler(&exLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	xk, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(exUse.Middleware()), Parts: kit.Parts{Runs: true, Ledger: true}, Logger: exLogger})
	if err != nil {
		t.Fatal(err)
	}
	x := &execfn.Executor{Runs: xk.Runs, Webhook: xk.Webhook, Logger: exLogger}
	if err := x.Execute(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The minute schedule's pass over parked runs.
	if _, err := x.ResumeStale(ctx); err != nil { // the schedule's stale-run pass
		t.Fatal(err)
	}
	if _, err := x.ResumeDue(ctx); err != nil {
		t.Fatal(err)
	}
	// A second run of the tenant: its delivery reads the signing secret
	// from the executor's cache, no round trip of its own.
	m2 := call("POST", "/runs", "lp3-0123456789abcdefghijkl", `{"workflowId":"webhook","inputs":{"url":"`+recv.URL+`","payload":2}}`)
	if err := x.Execute(ctx, m2["runId"].(string)); err != nil {
		t.Fatal(err)
	}
	checkGranted(t, "ExecutorRole", exUse, "RunsTable", "RunsTable/stream", "RunsTable/index/byWake", "RunsTable/index/byLive", "EffectsTable", "FenceTable", "ApiKeysTable")
	// Each grant on the runs table, its indexes and the api-keys table
	// was used (the effects table's GetItem reads a recorded value kept
	// beside its record, or a duplicate's record where the server returns
	// no old item, neither of which this run meets).
	for _, table := range []string{"RunsTable", "RunsTable/index/byWake", "RunsTable/index/byLive", "ApiKeysTable"} {
		checkAllUsed(t, "ExecutorRole", exUse, table)
	}
	// The executor names runs only: no partition key its role's condition
	// refuses (TestExecutorReachesRunsOnly); on the api-keys table, the
	// tenant's signing secret only, once for both deliveries
	// (TestSigningSecretsReachOnlyTheExecutor).
	checkLeadingKeys(t, "ExecutorRole", exUse, "RunsTable", "#", false)
	checkLeadingKeys(t, "ExecutorRole", exUse, "ApiKeysTable", "whsec#", true)
	checkLeadingKeys(t, "ExecutorRole", exUse, "ApiKeysTable", "key#", false)
	checkLeadingKeys(t, "AuthorizerRole", authUse, "ApiKeysTable", "whsec#", false)
	if n := exUse.used["dynamodb:GetItem ApiKeysTable"]; n != 1 {
		t.Fatalf("two deliveries of one tenant read its signing secret %d times; want once (the cache)", n)
	}
	// No log line of the executor carries the secret, in either form.
	if l := exLog.String(); l == "" || strings.Contains(l, rot.Secret) || strings.Contains(l, strings.TrimPrefix(rot.Secret, "whsec_")) {
		t.Fatalf("the executor's log (%d bytes) is empty or carries the signing secret", len(l))
	}
	recvMu.Lock()
	if len(signed) != 2 || !signed[0] || !signed[1] {
		t.Fatalf("deliveries verified under the tenant's secret: %v; want two, both signed", signed)
	}
	recvMu.Unlock()

	if st := call("GET", p, "", ""); st["status"] != "completed" || st["extensions"].(map[string]any)[apifn.ExtensionRun].(map[string]any)["activityIdentityRecipe"] != identity.ActivityRecipe ||
		st["extensions"].(map[string]any)[apifn.ExtensionRun].(map[string]any)["semanticRequestRecipe"] != semantic.RecipeV2 {
		t.Fatalf("run %v: want completed with its recipe stamps", st)
	}
	// The run item itself carries the stamps (written in the completion
	// transaction), and the effect was recorded under the identity they
	// compute.
	stored, err := k.Runs.Get(ctx, id)
	if err != nil || stored.Stamps != identity.CurrentStamps() {
		t.Fatalf("stored run %+v %v", stored, err)
	}
	wantID, _ := webhook.WebhookIdentity(stored)
	if w := call("GET", p+"/effects", "", ""); len(w["effects"].([]any)) != 1 || w["effects"].([]any)[0].(map[string]any)["effectId"] != wantID.EffectID {
		t.Fatalf("witness %v, want effect %s", w, wantID.EffectID)
	}
	// The read routes that are not the run's snapshot: the event poll, the
	// inbox, a fork of the completed run (a new run from its event log).
	call("GET", p+"/events/poll", "", "")
	call("GET", "/inbox", "", "")
	call("POST", p+":fork", "fk-0123456789abcdefghijkl", `{"mode":"replay"}`)
	m3 := call("POST", "/runs", "", `{"workflowId":"conformance-noop"}`)
	call("POST", "/runs/"+runs.ProjectID(m3["runId"].(string))+"/cancel", "lp2-0123456789abcdefghijkl", `{}`)
	// The tenant comes from the credential only: a body tenantId naming
	// another tenant is 403 forbidden.
	ev := events.APIGatewayV2HTTPRequest{RawPath: "/runs", Body: `{"workflowId":"conformance-noop","tenantId":"globex"}`,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": "bt-0123456789abcdefghijkl"}}
	ev.RequestContext.HTTP.Method = "POST"
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{authfn.ContextTenantKey: "acme"}}
	if r, _ := api.Handle(ctx, ev); r.StatusCode != 403 || !strings.Contains(r.Body, "forbidden") {
		t.Fatalf("body tenant: %d %s", r.StatusCode, r.Body)
	}
	// `OpenWOP-Dedup: enforce`: the scope's item is written beside the
	// run (no check of it commits in the completion transaction), and a
	// duplicate is refused after reading the holder.
	for i, want := range []int{201, 409} {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/runs", Body: `{"workflowId":"conformance-noop","scopeId":"order-7"}`,
			Headers: map[string]string{"content-type": "application/json", "idempotency-key": fmt.Sprintf("sc%d-0123456789abcdefghijkl", i), "openwop-dedup": "enforce"}}
		ev.RequestContext.HTTP.Method = "POST"
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{authfn.ContextTenantKey: "acme"}}
		if r, _ := api.Handle(ctx, ev); r.StatusCode != want {
			t.Fatalf("enforced create %d: %d %s, want %d", i, r.StatusCode, r.Body, want)
		}
	}
	// FenceTable: its tags only, at a replica stack's start-up
	// (TestHomeCrossRegionCheckIsGranted).
	checkGranted(t, "ApiRole", apiUse, "IdempotencyTable", "RunsTable", "EffectsTable", "EffectsTable/index/byRun", "FenceTable")
	// Every write to the runs table was made (create, scoped create,
	// cancel, reads): each action granted on it is needed.
	checkAllUsed(t, "ApiRole", apiUse, "RunsTable")
	// And on the effects table and its index (the witness). The
	// idempotency table's are pinned to the store's calls by
	// idem/dynamostore's TestIAMActionsMatchTheStoresCalls (a renewal,
	// a chunked replay and a read back are not met here).
	for _, table := range []string{"EffectsTable", "EffectsTable/index/byRun"} {
		checkAllUsed(t, "ApiRole", apiUse, table)
	}
	// The api function does write the items the executor's role refuses
	// (the scope's holder, the inbox): the condition is no formality.
	checkLeadingKeys(t, "ApiRole", apiUse, "RunsTable", "#", true)
	if apiCnt.CallOps()["TransactWriteItems"] == 0 {
		t.Fatalf("createRun did not commit its run in the completion transaction: %v", apiCnt.CallOps())
	}
}

// TestFencedEffects: under CROSS_REGION=fenced-effects the kit fences every
// webhook fire through FENCE_TABLE; the run still delivers once.
func TestFencedEffects(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	recv, n := deliveries(t)
	env := settings.Env{
		RunsTable: e.CreateTable(t, "RunsTable"), EffectsTable: e.CreateTable(t, "EffectsTable"), FenceTable: e.CreateTable(t, "FenceTable"),
		CrossRegion: settings.CrossRegionFenced, Webhook: webhook.WebhookPolicy{AllowLoopback: true},
		EffectLease: time.Minute, EffectRetention: 14 * 24 * time.Hour,
	}
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	k, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(), Parts: kit.Parts{Runs: true, Ledger: true}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if k.Webhook.Wrap == nil {
		t.Fatal("fenced-effects without a fence guard")
	}
	ctx := context.Background()
	run := newWebhookRun(t, k, recv)
	x := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: quiet}
	for i := 0; i < 2; i++ {
		if err := x.Execute(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := k.Runs.Get(ctx, run.ID)
	if r.Status != runs.StatusCompleted || n() != 1 {
		t.Fatalf("run %+v, %d deliveries", r, n())
	}
}

// TestExecutorUnderDynamoFaults: DynamoDB faults around a webhook run (a
// throttled status write, a throttled claim, a claim whose response was
// lost) make executions fail or retry, never double-fire: the redelivered
// run ends completed with exactly one delivery and one completed attempt.
func TestExecutorUnderDynamoFaults(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	var mu sync.Mutex
	var keys []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	defer recv.Close()
	faults := dynamotest.NewFaults()
	env := settings.Env{RunsTable: e.CreateTable(t, "RunsTable"), EffectsTable: e.CreateTable(t, "EffectsTable"),
		CrossRegion: settings.CrossRegionSingle, Webhook: webhook.WebhookPolicy{AllowLoopback: true},
		EffectLease: time.Minute, EffectRetention: 14 * 24 * time.Hour}
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	k, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Parts: kit.Parts{Runs: true, Ledger: true}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, _ := json.Marshal(map[string]any{"url": recv.URL, "payload": 1})
	run := runs.NewRun("acme", webhook.WorkflowWebhook, in, time.Now())
	if err := k.Runs.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	x := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: quiet}
	steps := []func(){
		func() { faults.FailNext("UpdateItem", 5, dynamotest.Throttle()) },
		func() { faults.FailNext("PutItem", 5, dynamotest.Throttle()) },
		func() { faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost()) },
		func() {},
	}
	var errs []error
	done := false
	for _, inject := range steps {
		faults.Clear()
		inject()
		if err := x.Execute(ctx, run.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		done = true
		break
	}
	faults.Clear()
	if !done {
		t.Fatalf("never completed: %v", errs)
	}
	if len(errs) < 2 {
		t.Fatalf("the injected faults did not fail executions: %v", errs)
	}
	r, _ := k.Runs.Get(ctx, run.ID)
	p, err := k.Ledger.Witness(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, w := range p.Effects {
		if w.State == "completed" {
			completed++
		}
	}
	if r.Status != runs.StatusCompleted || len(keys) != 1 || completed != 1 {
		t.Fatalf("run %s, deliveries %q, witness %+v", r.Status, keys, p.Effects)
	}
}

// TestFencedEffectsRecordsLiveInTheHomeRegion: under fenced-effects an
// executor in a replica region claims, marks and records its effects in
// the home region's replica of the effects table (FENCE_TABLE_REGION), as
// it takes its fencing tokens there, so no region ever writes an effect
// record another region also writes: the record every replica converges
// on is the one the home region decided. The witness still reads the
// local replica. moto keeps each region's tables apart, so the effects
// table here exists in the home region only.
func TestFencedEffectsRecordsLiveInTheHomeRegion(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	home, replica := e.InRegion("eu-west-1"), e.InRegion("us-east-1")
	recv, n := deliveries(t)
	env := settings.Env{
		RunsTable: replica.CreateTable(t, "RunsTable"), EffectsTable: home.CreateTable(t, "EffectsTable"), FenceTable: home.CreateTable(t, "FenceTable"),
		FenceTableRegion: "eu-west-1", CrossRegion: settings.CrossRegionFenced, Webhook: webhook.WebhookPolicy{AllowLoopback: true},
		EffectLease: time.Minute, EffectRetention: 14 * 24 * time.Hour,
	}
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	k, err := kit.NewKit(kit.Config{Env: env, Client: replica.Client(), Parts: kit.Parts{Runs: true, Ledger: true}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if k.Witness == k.Ledger {
		t.Fatal("the witness reads through the home region's client; want the local replica")
	}
	ctx := context.Background()
	run := newWebhookRun(t, k, recv)
	x := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: quiet}
	if err := x.Execute(ctx, run.ID); err != nil {
		t.Fatalf("execution in the replica region: %v", err)
	}
	if r, _ := k.Runs.Get(ctx, run.ID); r.Status != runs.StatusCompleted || n() != 1 {
		t.Fatalf("run %+v, %d deliveries", r, n())
	}
	out, err := home.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(env.EffectsTable)})
	if err != nil || out.Count == 0 {
		t.Fatalf("the home region's effects table holds %v items (%v), want the run's effect", out, err)
	}
}

// deliveries starts a webhook receiver for the test and returns its URL and
// how many deliveries it has had.
func deliveries(t *testing.T) (string, func() int) {
	var n int
	var mu sync.Mutex
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { mu.Lock(); n++; mu.Unlock() }))
	t.Cleanup(recv.Close)
	return recv.URL, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// newWebhookRun creates, in k's runs table, a webhook run delivering to url.
func newWebhookRun(t *testing.T, k *kit.Kit, url string) runs.Run {
	in, _ := json.Marshal(map[string]any{"url": url, "payload": 1})
	run := runs.NewRun("acme", webhook.WorkflowWebhook, in, time.Now())
	if err := k.Runs.Create(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	return run
}

// verifiesUnder is a receiver's Standard Webhooks check, from the scheme's
// definition: one of webhook-signature's "v1,{base64}" entries is the
// HMAC-SHA256, keyed by the base64 after "whsec_", of
// "{webhook-id}.{webhook-timestamp}.{body}".
func verifiesUnder(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	mac.Write(body)
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if sig == "v1,"+want && h.Get("webhook-id") != "" && h.Get("webhook-timestamp") != "" {
			return true
		}
	}
	return false
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestHomeCrossRegionCheckIsGranted: the start-up read of the home stack's
// CrossRegion (the tag of its FenceTable, RED_TEAM 537) calls, against
// moto, only what the api's and the executor's roles grant on that table,
// and finds a tag the table carries.
func TestHomeCrossRegionCheckIsGranted(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	fence := e.CreateTable(t, "FenceTable")
	ctx := context.Background()
	arn := "arn:aws:dynamodb:" + e.Region + ":123456789012:table/" + fence
	if _, err := e.Client().TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String(arn),
		Tags: []types.Tag{{Key: aws.String(kit.TagCrossRegion), Value: aws.String(settings.CrossRegionFenced)}}}); err != nil {
		t.Fatal(err)
	}
	env := settings.Env{CrossRegion: settings.CrossRegionReconciled, FenceTable: fence, FenceTableRegion: e.Region, HomeFenceTableARN: arn}
	use := newTableUse(map[string]string{"FenceTable": fence})
	warnings, err := kit.CheckHomeCrossRegion(ctx, e.Client(use.Middleware()), env)
	if err == nil || !errors.Is(err, kit.ErrConfig) {
		t.Fatalf("warnings %q, err %v: want the posture refused", warnings, err)
	}
	for _, role := range []string{"ApiRole", "ExecutorRole"} {
		granted := roleGrants(t, role)
		for k := range use.used {
			if !granted[k] {
				t.Errorf("%s: the check calls %q, which template.yaml does not grant", role, k)
			}
		}
	}
	if use.used["dynamodb:ListTagsOfResource FenceTable"] != 1 {
		t.Errorf("calls %v: want one ListTagsOfResource of the fence table", use.used)
	}
}
