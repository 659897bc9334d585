package securitytest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// quotingFaults fails the next DynamoDB calls of one operation with an API
// error whose message quotes every string value of the request's items and
// keys (the record id, the run's inputs), as a ValidationException or a
// conditional-check failure's message may quote the item it refused.
type quotingFaults struct {
	mu   sync.Mutex
	op   string
	code string
	n    int
}

func (f *quotingFaults) arm(op, code string, n int) {
	f.mu.Lock()
	f.op, f.code, f.n = op, code, n
	f.mu.Unlock()
}

// left is how many calls the armed fault has still to fail.
func (f *quotingFaults) left() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *quotingFaults) take(op string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 || (f.op != op && f.op != dynamotest.AnyOp) {
		return "", false
	}
	f.n--
	return f.code, true
}

// strs returns every string value of m, nested maps and lists included.
func strs(m map[string]types.AttributeValue) []string {
	var out []string
	var walk func(types.AttributeValue)
	walk = func(v types.AttributeValue) {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out = append(out, v.Value)
		case *types.AttributeValueMemberM:
			for _, x := range v.Value {
				walk(x)
			}
		case *types.AttributeValueMemberL:
			for _, x := range v.Value {
				walk(x)
			}
		}
	}
	for _, v := range m {
		walk(v)
	}
	sort.Strings(out)
	return out
}

func quoted(in any) []string {
	switch p := in.(type) {
	case *dynamodb.PutItemInput:
		return strs(p.Item)
	case *dynamodb.UpdateItemInput:
		return append(strs(p.Key), strs(p.ExpressionAttributeValues)...)
	case *dynamodb.GetItemInput:
		return strs(p.Key)
	case *dynamodb.DeleteItemInput:
		return append(strs(p.Key), strs(p.ExpressionAttributeValues)...)
	case *dynamodb.QueryInput:
		return append(strs(p.ExpressionAttributeValues), strs(p.ExclusiveStartKey)...)
	case *dynamodb.ScanInput:
		return append(strs(p.ExpressionAttributeValues), strs(p.ExclusiveStartKey)...)
	case *dynamodb.BatchGetItemInput:
		var out []string
		for _, ka := range p.RequestItems {
			for _, k := range ka.Keys {
				out = append(out, strs(k)...)
			}
		}
		return out
	case *dynamodb.TransactWriteItemsInput:
		var out []string
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				out = append(out, strs(it.Put.Item)...)
			case it.Update != nil:
				out = append(out, strs(it.Update.Key)...)
				out = append(out, strs(it.Update.ExpressionAttributeValues)...)
			case it.Delete != nil:
				out = append(out, strs(it.Delete.Key)...)
			case it.ConditionCheck != nil:
				out = append(out, strs(it.ConditionCheck.Key)...)
				out = append(out, strs(it.ConditionCheck.ExpressionAttributeValues)...)
			}
		}
		return out
	}
	return nil
}

func (f *quotingFaults) middleware(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("securitytest.quotingFaults",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if code, ok := f.take(middleware.GetOperationName(ctx)); ok {
					return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: code,
						Message: "One or more parameter values were invalid: " + strings.Join(quoted(in.Parameters), ", ")}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

// TestNoKeyOrBodyInLogsOnStoreFailures drives the api function, wired by
// the kit on DynamoDB (moto) exactly as deployed, with a recognisable
// Idempotency-Key and body through the failure paths of its stores: the
// claim, the completion transaction (with the run's create), a reclaim's
// update and a read each failing once with a ValidationException, a
// conditional-check failure and an internal error whose message quotes
// every value the call sent (as a service's message may quote what it
// refused), then the retry and a mismatch under the same key; throttling
// past the SDK's retries; a body at the size bound and one past it.
// Neither the key, nor a record id, nor the body's secret value appears in
// any log line or in any error answer.
func TestNoKeyOrBodyInLogsOnStoreFailures(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	env := settings.Env{
		Idem:          idemenv.Env{Enabled: true, Table: e.CreateTable(t, "IdempotencyTable")},
		RunsTable:     e.CreateTable(t, "RunsTable"),
		EffectsTable:  e.CreateTable(t, "EffectsTable"),
		CrossRegion:   settings.CrossRegionSingle,
		Webhook:       webhook.WebhookPolicy{AllowLoopback: true},
		Transactional: true, EffectLease: time.Minute, EffectRetention: 14 * 24 * time.Hour,
	}
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	faults := &quotingFaults{}
	throttle := dynamotest.NewFaults()
	k, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(dynamotest.FastRetries, throttle.Middleware(), faults.middleware),
		Parts: kit.Parts{Runs: true, Guard: true, Ledger: true}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	api, err := apifn.New(apifn.Config{Runs: k.Runs, Guard: k.Guard, Ledger: k.Ledger, Webhook: env.Webhook, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	call := func(key, body string) events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/runs", Body: body,
			Headers: map[string]string{"content-type": "application/json", "idempotency-key": key}}
		ev.RequestContext.HTTP.Method = http.MethodPost
		ev.RequestContext.RequestID = "req-" + fmt.Sprint(time.Now().UnixNano())
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{authfn.ContextTenantKey: tenant}}
		r, err := api.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode >= 400 && strings.Contains(r.Body, marker) {
			t.Errorf("error answer echoes a secret: %d %s", r.StatusCode, r.Body)
		}
		return r
	}
	body := func(v string) string {
		return `{"workflowId":"conformance-noop","inputs":{"x":"` + inputSec + `-` + v + `"}}`
	}
	var keys []string
	n := 0
	next := func() string {
		n++
		k := fmt.Sprintf("%s-store-failure-key-%04d", marker, n)
		keys = append(keys, k)
		return k
	}
	statuses := map[string]int{}
	for _, op := range []string{"PutItem", "UpdateItem", "TransactWriteItems", "GetItem"} {
		for _, code := range []string{"ValidationException", "ConditionalCheckFailedException", "InternalServerError"} {
			key := next()
			switch op {
			case "GetItem":
				// A replay's read: the record exists first.
				if r := call(key, body(op)); r.StatusCode != http.StatusCreated {
					t.Fatalf("%s: %d %s", op, r.StatusCode, r.Body)
				}
			case "UpdateItem":
				// A reclaim's update: the first completion fails, so the
				// retry takes the record over.
				faults.arm("TransactWriteItems", "InternalServerError", 1)
				if r := call(key, body(op)); r.StatusCode < 500 {
					t.Fatalf("%s: %d %s, want the completion refused", op, r.StatusCode, r.Body)
				}
			}
			faults.arm(op, code, 1)
			r := call(key, body(op))
			statuses[op+"/"+code] = r.StatusCode
			faults.arm("", "", 0)
			// The retry, and a mismatch under the same key.
			call(key, body(op))
			call(key, body(op+"-other"))
		}
	}
	// Throttled past the SDK's retries, on every call.
	throttle.FailNext(dynamotest.AnyOp, 1000, dynamotest.Throttle())
	statuses["throttled"] = call(next(), body("throttled")).StatusCode
	throttle.Clear()
	// A body at the bound.
	big := `{"workflowId":"conformance-noop","inputs":{"x":"` + inputSec + strings.Repeat("y", apifn.MaxBodyBytes-200) + `"}}`
	statuses["big"] = call(next(), big).StatusCode
	statuses["too big"] = call(next(), big+strings.Repeat(" ", 300)).StatusCode
	t.Logf("statuses: %v", statuses)

	out := logs.String()
	if !strings.Contains(out, "One or more parameter values were invalid") {
		t.Fatalf("no store error was logged: the test proves nothing\n%s", out)
	}
	for _, key := range keys {
		if i := strings.Index(out, key); i >= 0 {
			t.Errorf("the logs carry the key %s: ...%s...", key, out[max(0, i-300):min(len(out), i+100)])
		}
	}
	// Every record id starts so (an unkeyed hash of tenant, operation and
	// key: a guessed key can be tested against it).
	if i := strings.Index(out, keyspace.CallerPrefix); i >= 0 {
		t.Errorf("the logs carry a record id: ...%s...", out[max(0, i-300):min(len(out), i+100)])
	}
	if i := strings.Index(out, marker); i >= 0 {
		t.Errorf("the logs carry a secret: ...%s...", out[max(0, i-300):min(len(out), i+100)])
	}
	if t.Failed() || testing.Verbose() {
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				lines = append(lines, fmt.Sprint(m["msg"], " | ", m["error"]))
			}
		}
		t.Logf("log lines:\n%s", strings.Join(lines, "\n"))
	}
}
