package securitytest

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/testutil"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/keyhash"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// marker is part of every secret value the test sends, so a leak of any of
// them, whole or in part, is found by one search. Values that cannot carry
// it (derived keys, stored hashes) are listed separately.
const marker = "S3CR3T"

// Distinctive secrets, each in a form the code accepts.
const (
	apiKey      = "idk_" + marker + "-api-key-0123456789abcdef"
	wrongAPIKey = "idk_" + marker + "-wrong-key-0123456789abcd"
	idemKey     = marker + "-idem-key-0123456789abcdef"
	cancelKey   = marker + "-cancel-key-0123456789abcd"
	urlPath     = "/hook/" + marker + "-url-path-token"
	urlQuery    = "token=" + marker + "-url-query-token"
	payloadSec  = marker + "-webhook-payload"
	inputSec    = marker + "-run-input"
	tenant      = "acme"
)

// invalidKeys are Idempotency-Key values the default grammar refuses; none
// may be echoed back or logged.
var invalidKeys = []string{
	marker + " invalid key with spaces 0123",
	marker + "-too-long-" + strings.Repeat("x", 200),
	marker + "-comma-key-0123456789,abcdef",
	" " + marker + "-leading-space-0123456789ab",
	marker + "-bad-char-0123456789/abcdefgh",
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = testutil.SyncBuffer

// failingKeys is a key store that is down.
type failingKeys struct{ apikeys.KeyStore }

func (failingKeys) Tenant(context.Context, string) (string, bool, error) {
	return "", false, errors.New("dynamodb: ProvisionedThroughputExceededException")
}

// flakyRuns fails the next Create (an internal error under the claim).
type flakyRuns struct {
	*runs.MemRuns
	fail atomic.Bool
}

func (f *flakyRuns) Create(ctx context.Context, r runs.Run) error {
	if f.fail.CompareAndSwap(true, false) {
		return errors.New("dynamodb: InternalServerError")
	}
	return f.MemRuns.Create(ctx, r)
}

// provider is a webhook receiver on loopback: the first delivery is cut
// after the request was read (outcome unknown), the second answered 503,
// every later one 200. It records the Idempotency-Key of each delivery.
type provider struct {
	srv  *httptest.Server
	n    atomic.Int32
	mu   sync.Mutex
	keys []string
	body []string
}

func newProvider(t *testing.T) *provider {
	p := &provider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.keys = append(p.keys, r.Header.Get("Idempotency-Key"))
		p.body = append(p.body, string(b))
		p.mu.Unlock()
		switch p.n.Add(1) {
		case 1:
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

type world struct {
	logs, metrics syncBuffer
	logger        *slog.Logger
	rec           *emf.Recorder
	runs          *flakyRuns
	effects       *ledgermem.Store
	ledger        *ledger.Ledger
	auth          *authfn.Handler
	api           *apifn.Handler
	exec          *execfn.Executor
	audit         *auditfn.Auditor
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{}
	// Debug level: every line any component can write is captured.
	w.logger = slog.New(slog.NewJSONHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.rec = emf.New(&w.metrics, "idemkit")
	keys := apikeys.NewMemKeys()
	if err := keys.PutKey(context.Background(), apiKey, tenant); err != nil {
		t.Fatal(err)
	}
	w.auth = &authfn.Handler{Keys: keys, Logger: w.logger}
	guard, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: w.logger, Metrics: w.rec})
	if err != nil {
		t.Fatal(err)
	}
	w.effects = ledgermem.New()
	w.ledger, err = ledger.New(ledger.Config{Store: w.effects, Metrics: w.rec})
	if err != nil {
		t.Fatal(err)
	}
	w.runs = &flakyRuns{MemRuns: runs.NewMemRuns()}
	policy := webhook.WebhookPolicy{AllowLoopback: true}
	w.api, err = apifn.New(apifn.Config{Runs: w.runs, Guard: guard, Ledger: w.ledger, Webhook: policy, Logger: w.logger})
	if err != nil {
		t.Fatal(err)
	}
	w.exec = &execfn.Executor{Runs: w.runs, Logger: w.logger, MaxAttempts: 3, Webhook: &webhook.Webhook{
		Ledger: w.ledger, Policy: policy, MaxTries: 4, Backoff: time.Millisecond, WaitInline: time.Second}}
	ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1", Metrics: w.rec, Log: w.logger})
	if err != nil {
		t.Fatal(err)
	}
	w.audit = &auditfn.Auditor{Metrics: w.rec, Logger: w.logger, Conflicts: ca}
	return w
}

// authorize runs the Lambda authorizer on an Authorization header and
// returns the request context API Gateway would pass on (nil when refused).
func (w *world) authorize(t *testing.T, authorization string) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	t.Helper()
	resp, err := w.auth.Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{
		Type: "REQUEST", RouteKey: "POST /runs", Headers: map[string]string{"authorization": authorization}})
	if err != nil {
		if !errors.Is(err, authfn.ErrUnauthorized) && !strings.Contains(err.Error(), "unavailable") {
			t.Fatalf("authorizer: %v", err)
		}
		if strings.Contains(err.Error(), marker) {
			t.Fatalf("authorizer error echoes the key: %v", err)
		}
		return nil
	}
	if !resp.IsAuthorized {
		return nil
	}
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: resp.Context}
}

// call sends one API request (authorized with apiKey) and fails the test if
// the response echoes a secret it was not sent for: the only secret a
// response may carry is the run's own inputs, and only to their tenant
// (createRun never echoes them).
func (w *world) call(t *testing.T, method, path, key, body string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: path, Body: body,
		Headers: map[string]string{"authorization": "Bearer " + apiKey}}
	if body != "" {
		ev.Headers["content-type"] = "application/json"
	}
	if key != "" {
		ev.Headers["idempotency-key"] = key
	}
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, path
	ev.RequestContext.RequestID, ev.RequestContext.DomainName = "req-1", "api.example.com"
	ev.RequestContext.Authorizer = w.authorize(t, ev.Headers["authorization"])
	resp, err := w.api.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	hdrs, _ := json.Marshal(resp.Headers)
	if strings.Contains(string(hdrs), apiKey) {
		t.Fatalf("%s %s: response headers carry the API key: %s", method, path, hdrs)
	}
	if resp.StatusCode >= 400 && (strings.Contains(resp.Body, marker) || strings.Contains(string(hdrs), marker)) {
		t.Fatalf("%s %s: error response echoes a secret: %d %s %s", method, path, resp.StatusCode, hdrs, resp.Body)
	}
	return resp
}

func runID(t *testing.T, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &m); err != nil || m["runId"] == nil {
		t.Fatalf("no runId: %d %s", resp.StatusCode, resp.Body)
	}
	return m["runId"].(string)
}

// TestNoSecretInLogsMetricsOrErrors drives the authorizer, api, executor
// and auditor handlers with distinctive secrets (API keys, Idempotency-Keys
// valid and invalid, a webhook URL whose path and query carry tokens, a
// webhook payload, run inputs) through every path that logs: success,
// replay, mismatch, invalid keys, unknown API key, key-store outage, an
// internal error under the claim, webhook deliveries cut, 503-ed and
// refused, lease reclaims, escaped attempts, TTL deletions of unfinished
// records and a cross-region conflict. No secret, no derived provider key
// and no stored API-key hash appears in any log line or EMF line, and no
// error returned to a client echoes a secret.
func TestNoSecretInLogsMetricsOrErrors(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	prov := newProvider(t)
	hookURL := prov.srv.URL + urlPath + "?" + urlQuery
	body := `{"workflowId":"webhook","inputs":{"url":"` + hookURL + `","payload":{"note":"` + payloadSec + `"}}}`

	// Authorizer: unknown key, no key, key store down.
	if w.authorize(t, "Bearer "+wrongAPIKey) != nil || w.authorize(t, "Basic "+wrongAPIKey) != nil || w.authorize(t, wrongAPIKey) != nil {
		t.Fatal("a bad credential was authorized")
	}
	down := &authfn.Handler{Keys: failingKeys{}, Logger: w.logger}
	if _, err := down.Authorize(ctx, "Bearer "+apiKey); err == nil || strings.Contains(err.Error(), marker) {
		t.Fatalf("key store down: %v", err)
	}

	// createRun: first, replay, mismatch under the same key.
	first := w.call(t, "POST", "/runs", idemKey, body)
	if first.StatusCode != http.StatusCreated {
		t.Fatalf("createRun: %d %s", first.StatusCode, first.Body)
	}
	if r := w.call(t, "POST", "/runs", idemKey, body); r.StatusCode != http.StatusCreated || r.Body != first.Body {
		t.Fatalf("replay: %d %s", r.StatusCode, r.Body)
	}
	if r := w.call(t, "POST", "/runs", idemKey, `{"workflowId":"conformance-noop","inputs":{"x":"`+inputSec+`"}}`); r.StatusCode != http.StatusConflict {
		t.Fatalf("mismatch: %d %s", r.StatusCode, r.Body)
	}
	// Invalid keys: 400, never echoed (call checks the response).
	for _, k := range invalidKeys {
		if r := w.call(t, "POST", "/runs", k, body); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("invalid key %q: %d %s", k, r.StatusCode, r.Body)
		}
	}
	// A run with secret inputs, and an internal error under a claim.
	noop := w.call(t, "POST", "/runs", "", `{"workflowId":"conformance-noop","inputs":{"x":"`+inputSec+`"}}`)
	w.runs.fail.Store(true)
	if r := w.call(t, "POST", "/runs", marker+"-failing-key-0123456789ab", `{"workflowId":"conformance-noop","inputs":{"x":"`+inputSec+`"}}`); r.StatusCode != http.StatusInternalServerError {
		t.Fatalf("internal error: %d %s", r.StatusCode, r.Body)
	}
	// A webhook run whose destination is refused only at delivery (a URL
	// the policy admits at createRun but which has nothing listening).
	deadURL := "http://127.0.0.1:1" + urlPath + "?" + urlQuery
	dead := w.call(t, "POST", "/runs", "", `{"workflowId":"webhook","inputs":{"url":"`+deadURL+`","payload":"`+payloadSec+`"}}`)

	// Executor: the INSERT images of the runs (inputs included, as the
	// stream delivers them).
	id, deadID, noopID := runID(t, first), runID(t, dead), runID(t, noop)
	var recs []stream.StreamRecord
	for i, rid := range []string{id, deadID, noopID} {
		r, err := w.runs.Get(ctx, rid)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, stream.StreamRecord{EventID: string(rune('a' + i)), EventName: "INSERT", NewImage: map[string]types.AttributeValue{
			"pk": s(r.ID), "tenant": s(r.Tenant), "workflowId": s(r.WorkflowID), "status": s(string(r.Status)), "inputs": s(string(r.Inputs)),
			"activityIdentityRecipe": s(r.ActivityIdentityRecipe), "semanticRequestRecipe": s(r.SemanticRequestRecipe)}})
	}
	for range 3 {
		if retry := w.exec.HandleRecords(ctx, recs); len(retry) == 0 {
			break
		}
	}
	run, err := w.runs.Get(ctx, id)
	if err != nil || run.Status != runs.StatusCompleted {
		t.Fatalf("webhook run: %+v %v", run, err)
	}
	// A failed delivery's error, recorded on the run (and served to its
	// tenant by getRun and the events stream), names the destination by
	// scheme and host only: webhook URLs often carry credentials in their
	// path or query.
	if st, _ := w.runs.Get(ctx, deadID); st.Status != runs.StatusFailed || !strings.Contains(st.Error, "127.0.0.1:1") ||
		strings.Contains(st.Error, marker) || strings.Contains(st.LastError, marker) {
		t.Fatalf("dead webhook run: %s %q %q", st.Status, st.Error, st.LastError)
	}

	// The provider received the derived provider key, never the caller's
	// Idempotency-Key (or anything derived from it), the same on every try.
	ident, err := webhook.WebhookIdentity(run)
	if err != nil {
		t.Fatal(err)
	}
	prov.mu.Lock()
	got := append([]string(nil), prov.keys...)
	prov.mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("provider saw %d deliveries, want 3 (cut, 503, 200)", len(got))
	}
	for _, k := range got {
		if k != ident.ProviderKey || k == idemKey || strings.Contains(k, marker) {
			t.Fatalf("provider key %q, want the derived %q (caller key %q)", k, ident.ProviderKey, idemKey)
		}
	}

	// Read routes: snapshot, witness, events; then cancel under a key.
	for _, p := range []string{"", "/effects", "/events"} {
		if r := w.call(t, "GET", "/runs/"+runs.ProjectID(id)+p, "", ""); r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, r.StatusCode, r.Body)
		} else if p == "/effects" && strings.Contains(r.Body, marker) {
			t.Fatalf("the witness carries content: %s", r.Body)
		}
	}
	w.call(t, "POST", "/runs/"+runs.ProjectID(noopID)+"/cancel", cancelKey, `{}`)

	// Auditor: the effect records as the effects stream shows them, with a
	// reclaim of a stalled claim, escaped attempts, a TTL deletion of an
	// unfinished claim and a cross-region overwrite; Layer-1 records'
	// reclaim and TTL deletion.
	var changes []stream.StreamRecord
	for _, rid := range []string{id, deadID} {
		effs, err := w.effects.ListByRun(ctx, rid)
		if err != nil || len(effs) == 0 {
			t.Fatalf("effects of %s: %d %v", rid, len(effs), err)
		}
		for _, rec := range effs {
			stalled := *rec
			stalled.State, stalled.Attempt, stalled.Outcome = ledger.StateFiring, 1, nil
			stalled.Owner = "other-owner-token"
			stalled.Attempts = []ledger.Attempt{rec.Attempts[0]}
			stalled.Attempts[0].State = ledger.AttemptClaimed
			other := *rec
			other.Owner, other.CreatedAt = "region-b-owner-token", rec.CreatedAt.Add(time.Millisecond)
			changes = append(changes,
				stream.StreamRecord{EventName: "MODIFY", OldImage: encode(t, &stalled), NewImage: encode(t, rec)},
				stream.StreamRecord{EventName: "MODIFY", OldImage: encode(t, rec), NewImage: encode(t, &other)},
				stream.StreamRecord{EventName: "REMOVE", PrincipalID: stream.TTLPrincipal, IdentityType: "Service", OldImage: encode(t, &stalled)})
		}
	}
	pk := keyspace.ID(tenant, apifn.OpCreateRun, idemKey)
	pending := map[string]types.AttributeValue{"pk": s(pk), "state": s("pending"), "attempt": n("1")}
	again := map[string]types.AttributeValue{"pk": s(pk), "state": s("pending"), "attempt": n("2")}
	changes = append(changes, stream.StreamRecord{EventName: "MODIFY", OldImage: pending, NewImage: again},
		stream.StreamRecord{EventName: "REMOVE", PrincipalID: stream.TTLPrincipal, IdentityType: "Service", OldImage: pending})
	c := w.audit.Audit(ctx, changes)
	if c.Reclaims[auditfn.TableEffects] == 0 || c.Escaped[auditfn.TableEffects] == 0 || c.TTLExpiredPending[auditfn.TableEffects] == 0 ||
		c.Reclaims[auditfn.TableIdempotency] == 0 || c.TTLExpiredPending[auditfn.TableIdempotency] == 0 || c.Conflicts == 0 {
		t.Fatalf("the audit paths were not exercised: %+v", c)
	}

	// The sinks.
	logs, metrics := w.logs.String(), w.metrics.String()
	if logs == "" || metrics == "" {
		t.Fatal("nothing was logged or measured: the test proves nothing")
	}
	derived := map[string]string{
		"provider key":          ident.ProviderKey,
		"stored API key hash":   strings.TrimPrefix(apikeys.HashKey(apiKey), "key#"),
		"wrong API key hash":    strings.TrimPrefix(apikeys.HashKey(wrongAPIKey), "key#"),
		"webhook effect id":     ident.EffectID,
		"webhook URL port+path": prov.srv.URL[len("http://"):] + urlPath,
	}
	for name, sink := range map[string]string{"logs": logs, "metrics": metrics} {
		if i := strings.Index(sink, marker); i >= 0 {
			t.Errorf("%s carry a secret: ...%s...", name, sink[max(0, i-200):min(len(sink), i+100)])
		}
		for what, v := range derived {
			if strings.Contains(sink, v) {
				t.Errorf("%s carry the %s %q", name, what, v)
			}
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("logs:\n%s", logs)
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func encode(t *testing.T, r *ledger.Record) map[string]types.AttributeValue {
	t.Helper()
	m, err := ledgerdynamo.EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNoEffectIDInExecutorLogs drives the executor into the ledger's
// answers that name the effect (an effect in flight elsewhere, through the
// stream record and through the schedule's pass over parked runs): the
// provider idempotency key is a public derivation of the effect id
// (identity.ProviderKey), so the logs carry neither, only their keyed hashes.
func TestNoEffectIDInExecutorLogs(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(recv.Close)
	created := w.call(t, "POST", "/runs", marker+"-effect-key-0123456789ab", `{"workflowId":"webhook","inputs":{"url":"`+recv.URL+`","payload":1}}`)
	run, err := w.runs.Get(ctx, runID(t, created))
	if err != nil {
		t.Fatal(err)
	}
	ident, err := webhook.WebhookIdentity(run)
	if err != nil {
		t.Fatal(err)
	}

	// Another execution holds the effect's claim while the executor runs.
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := w.ledger.Do(ctx, ledger.Effect{Identity: ident, RunID: run.ID, NodeID: webhook.NodeDeliver},
			func(context.Context, ledger.Call) ([]byte, error) {
				close(started)
				<-release
				return []byte(`{"status":200}`), nil
			})
		done <- err
	}()
	<-started
	rec := stream.StreamRecord{EventID: "e1", EventName: "INSERT", NewImage: map[string]types.AttributeValue{
		"pk": s(run.ID), "tenant": s(run.Tenant), "workflowId": s(run.WorkflowID), "status": s(string(run.Status)), "inputs": s(string(run.Inputs)),
		"activityIdentityRecipe": s(run.ActivityIdentityRecipe), "semanticRequestRecipe": s(run.SemanticRequestRecipe)}}
	if retry := w.exec.HandleRecords(ctx, []stream.StreamRecord{rec}); len(retry) != 1 {
		t.Fatalf("an effect in flight elsewhere: retry %v, want the record retried", retry)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	logs := w.logs.String()
	if !strings.Contains(logs, "run will be retried") {
		t.Fatalf("the in-flight path was not logged: the test proves nothing\n%s", logs)
	}
	for what, v := range map[string]string{"effect id": ident.EffectID, "effect id's opaque part": ident.EffectID[len(run.Tenant)+1:], "provider key": ident.ProviderKey} {
		if i := strings.Index(logs, v); i >= 0 {
			t.Errorf("the logs carry the %s: ...%s...", what, logs[max(0, i-200):min(len(logs), i+100)])
		}
	}
	if !strings.Contains(logs, keyhash.Log(ident.EffectID)) {
		t.Errorf("the logs do not name the effect by its keyed hash %s:\n%s", keyhash.Log(ident.EffectID), logs)
	}
}
