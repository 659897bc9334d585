package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestEveryLogLineCarriesRequestOperationKeyHashOutcome: every line the
// Guard logs about a keyed request (debug level included) carries the
// request id, the operation, the key's hash (never the key) and an
// outcome, whatever happened: claimed and replayed, a payload mismatch, a
// handler error, a store that is unavailable at the claim or fails at the
// completion, and a late write whose lease was lost. The functions log
// these lines in Lambda's JSON format, so a log query can follow one key
// or one outcome.
func TestEveryLogLineCarriesRequestOperationKeyHashOutcome(t *testing.T) {
	debug := func(logs *testutil.SyncBuffer) *slog.Logger {
		return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	scenarios := map[string]func(t *testing.T, logs *testutil.SyncBuffer){
		"claimed, replayed, mismatch, handler error": func(t *testing.T, logs *testutil.SyncBuffer) {
			e := newEnv(t, func(c *idem.Config) { c.Logger = debug(logs) })
			e.call(&handler{}, ev)
			e.call(&handler{}, ev)
			e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{"other":1}`))
			e.call(&handler{err: errors.New("boom")}, v2event("POST", "POST /runs", "k_abcdefghijklmnopqrstuvwx", `{}`))
		},
		"store unavailable at the claim and at the completion": func(t *testing.T, logs *testutil.SyncBuffer) {
			for _, op := range []string{"Claim", "Complete"} {
				s := newStallStore(op)
				s.unavailable = fmt.Errorf("%w: throttled", idem.ErrStoreUnavailable)
				g := stallGuard(t, s, func(c *idem.Config) { c.Logger = debug(logs) })
				if _, err := g.HTTPAPI((&handler{}).v2)(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
			}
		},
		"a failed unit of work an adapter reports": func(t *testing.T, logs *testutil.SyncBuffer) {
			e := newEnv(t, func(c *idem.Config) { c.Logger = debug(logs) })
			ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
			e.guard.LogFailure(ctx, "idempotency: record failed", "orders", testKey, false, idem.OutcomeMismatch, idem.ErrPayloadMismatch)
			e.guard.LogFailure(ctx, "idempotency: record failed", "orders", "msg-1", true, idem.OutcomeInFlight, idem.ErrInFlight)
		},
		"lease lost": func(t *testing.T, logs *testutil.SyncBuffer) {
			e := newEnv(t, func(c *idem.Config) { c.Logger = debug(logs) })
			release, started := make(chan struct{}), make(chan struct{})
			slow := &handler{block: release, before: func(context.Context) { close(started) }}
			done := make(chan events.APIGatewayV2HTTPResponse)
			go func() { done <- e.call(slow, ev) }()
			<-started
			e.clock.Advance(idem.DefaultLease + time.Second)
			e.call(&handler{}, ev)
			close(release)
			<-done
		},
	}
	for name, run := range scenarios {
		t.Run(name, func(t *testing.T) {
			var logs testutil.SyncBuffer
			run(t, &logs)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) < 2 {
				t.Fatalf("only %d log lines:\n%s", len(lines), logs.String())
			}
			outcomes := map[string]bool{}
			for _, line := range lines {
				if strings.Contains(line, testKey) {
					t.Fatalf("the key reached the log: %s", line)
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not a JSON line: %s", line)
				}
				for _, attr := range []string{"request_id", "operation", "key_hash", "outcome"} {
					if v, _ := rec[attr].(string); v == "" {
						t.Errorf("line without %s: %s", attr, line)
					}
				}
				o, _ := rec["outcome"].(string)
				outcomes[o] = true
			}
			t.Logf("outcomes logged: %v", outcomes)
		})
	}
}
