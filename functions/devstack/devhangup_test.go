package devstack

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// writes records whether anything was written to a response.
type writes struct {
	httptest.ResponseRecorder
	wrote bool
}

func (w *writes) WriteHeader(code int) { w.wrote = true; w.ResponseRecorder.WriteHeader(code) }
func (w *writes) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseRecorder.Write(b)
}

// TestClientHangUpIsNotAStoreOutage: on every engine, a client of `idemkit
// dev` that hangs up in the middle of a DynamoDB call (its request's
// context cancelled before the call was sent or after it landed) is not
// answered 503 idemkit.store_unavailable but 499
// idemkit.client_closed_request, the gateway logs the hang-up at info (no
// error, no store outage), and a retry with the same key is served at
// once (201), a read too.
func TestClientHangUpIsNotAStoreOutage(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		h := &dynamotest.HangUp{}
		gw, logs := hangUpGateway(t, e, h.Middleware())
		serve := func(ctx context.Context, method, path, key, body string) *writes {
			r := httptest.NewRequest(method, path, strings.NewReader(body)).WithContext(ctx)
			r.Header.Set("Authorization", "Bearer k1")
			if key != "" {
				r.Header.Set("Idempotency-Key", key)
			}
			if body != "" {
				r.Header.Set("Content-Type", "application/json")
			}
			w := &writes{ResponseRecorder: *httptest.NewRecorder()}
			gw.ServeHTTP(w, r)
			return w
		}
		var runID string
		for i, c := range []struct {
			name, op string
			landed   bool
			get      bool // a read (GET /runs/{id}), not under Layer 1
		}{
			{"ClaimNotSent", "PutItem", false, false},
			{"ClaimLanded", "PutItem", true, false},
			{"ReadNotSent", "GetItem", false, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				start := len(logs.String())
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				key := "hangup-0123456789abcdefgh" + string(rune('a'+i))
				method, path, body := http.MethodPost, "/runs", `{"workflowId":"conformance-noop"}`
				if c.get {
					method, path, key, body = http.MethodGet, "/runs/"+runs.ProjectID(runID), "", ""
				}
				h.Arm(c.op, cancel, c.landed)
				if w := serve(ctx, method, path, key, body); w.wrote && (w.Code != idem.StatusClientClosed || !strings.Contains(w.Body.String(), idem.CodeClientClosed)) {
					t.Fatalf("the hung-up client was answered %d %s", w.Code, w.Body)
				}
				out := logs.String()[start:]
				if !strings.Contains(out, `"msg":"dev: the client closed the request"`) || strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, "store_unavailable") {
					t.Fatalf("logs:\n%s", out)
				}
				w := serve(context.Background(), method, path, key, body)
				want := map[bool]int{false: http.StatusCreated, true: http.StatusOK}[c.get]
				if w.Code != want {
					t.Fatalf("the retry: %d %s", w.Code, w.Body)
				}
				if !c.get && runID == "" {
					runID = strings.Split(strings.Split(w.Body.String(), `"runId":"`)[1], `"`)[0]
				}
			})
		}
	})
}

// hangUpGateway is dev's gateway over the api handler on e's tables, its
// DynamoDB client wrapped in mw (a hang-up injector) with fast retries and
// the store watch, the Guard answering duplicates at once (Wait -1), the
// key k1 naming tenant acme, and every log line in the returned buffer.
func hangUpGateway(t *testing.T, e *dynamotest.Emulator, mw func(*dynamodb.Options)) (*gateway, *testutil.SyncBuffer) {
	t.Helper()
	c := e.Client(dynamotest.FastRetries, watchStore, mw)
	rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
	st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: st, Logger: logger, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	api, err := apifn.New(apifn.Config{Runs: rs, Guard: g, Ledger: l, BaseURL: "http://dev", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	keys := apikeys.NewMemKeys()
	_ = keys.PutKey(context.Background(), "k1", "acme")
	return &gateway{api: api, auth: &authfn.Handler{Keys: keys, Logger: logger}, log: logger}, logs
}
