package dynamostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestMisconfiguredTableIsAServerConfigurationError: on every engine, a
// Guard whose table does not exist, or was created with another key
// schema, answers every keyed request 500
// idemkit.server_configuration_error without Retry-After (a retry with the
// same key meets the same table), runs no handler, counts each refusal and
// logs the problem and its fix once, not once per request; Guard.Once
// returns ErrStoreMisconfigured, never ErrStoreUnavailable (which a queue
// would retry forever).
func TestMisconfiguredTableIsAServerConfigurationError(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range e.Misconfigured() {
			t.Run(c.Name, func(t *testing.T) {
				s := newStore(t, e.Client(dynamotest.FastRetries), c.Table(t))
				var logs testutil.SyncBuffer
				m := &testutil.Counts{}
				g, err := idem.New(idem.Config{
					Tenant:  idem.AuthorizerKey("tenantId"),
					Store:   s,
					Logger:  slog.New(slog.NewJSONHandler(&logs, nil)),
					Metrics: m,
				})
				if err != nil {
					t.Fatal(err)
				}
				h := &countingHandler{}
				for i := 0; i < 3; i++ {
					key := newKey()
					r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{"a":1}`))
					var env struct{ Error, Message string }
					_ = json.Unmarshal([]byte(r.Body), &env)
					if r.StatusCode != 500 || env.Error != idem.CodeServerConfiguration || r.Headers["Retry-After"] != "" {
						t.Fatalf("request %d: %d %v %s; want 500 %s without Retry-After", i, r.StatusCode, r.Headers, r.Body, idem.CodeServerConfiguration)
					}
					if strings.Contains(logs.String(), key) {
						t.Fatal("a raw key reached the log")
					}
				}
				if h.runs.Load() != 0 {
					t.Fatalf("handler ran %d times", h.runs.Load())
				}
				if got := m.Get(idem.MetricStoreMisconfigured); got != 3 {
					t.Errorf("%s = %v, want 3", idem.MetricStoreMisconfigured, got)
				}
				if n := strings.Count(logs.String(), "idemkit doctor"); n != 1 {
					t.Errorf("the fix is logged %d times, want once:\n%s", n, logs.String())
				}
				if !strings.Contains(logs.String(), "IdempotencyTable") {
					t.Errorf("the log does not say which table to create:\n%s", logs.String())
				}
				_, ran, err := g.Once(ctxT(t), idem.Work{Key: newKey(), Operation: "op", Payload: []byte(`{}`),
					Run: func(ctx context.Context) ([]byte, error) { return []byte(`{}`), nil }})
				if ran || !errors.Is(err, idem.ErrStoreMisconfigured) || errors.Is(err, idem.ErrStoreUnavailable) {
					t.Fatalf("Once: ran %v, %v; want ErrStoreMisconfigured and not ErrStoreUnavailable", ran, err)
				}
			})
		}
	})
}
