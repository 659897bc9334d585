package dynamostore_test

// Keys derived from the request (Route.DeriveKey), on DynamoDB (every
// engine): the same claim, replay and round trips as a caller's key, in a
// keyspace of its own.

import (
	"encoding/json"
	"github.com/idemkit/idemkit/idem/keyspace"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// derivedGuard is a Guard on st under the OpenWOP policy with derived keys
// allowed; derive, when set, is the key of "POST /runs".
func derivedGuard(t *testing.T, st idem.Store, clk *clock.Manual, derive bool) *idem.Guard {
	t.Helper()
	p := idem.PolicyOpenWOP
	p.Name = "derived"
	p.DerivedKeys = true
	cfg := idem.Config{
		Policy: p,
		Tenant: idem.AuthorizerKey("tenantId"),
		Store:  st,
		Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	if derive {
		cfg.Routes = map[string]idem.Route{"POST /runs": {DeriveKey: func(body []byte, _ func(string) []string) (string, error) {
			var m struct {
				Order string `json:"order"`
			}
			err := json.Unmarshal(body, &m)
			return m.Order, err
		}}}
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// derivedEvent is a request without an Idempotency-Key header.
func derivedEvent(body string) events.APIGatewayV2HTTPRequest {
	ev := guardEvent("", body)
	delete(ev.Headers, "idempotency-key")
	return ev
}

func TestDerivedKeyReplaysWithoutHeader(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := derivedGuard(t, v.s, clock.NewManual(v.now), true)
		h := &countingHandler{}
		w := g.HTTPAPI(h.serve)
		body := `{"order":"ord-` + rnd(8) + `"}`

		// Parallel duplicates: one execution, every other answer a replay or
		// the in-flight answer.
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := w(ctxT(t), derivedEvent(body))
				if err != nil || (r.StatusCode != 201 && r.StatusCode != 409) {
					t.Errorf("duplicate: %d %s %v", r.StatusCode, r.Body, err)
				}
			}()
		}
		wg.Wait()
		if n := h.runs.Load(); n != 1 {
			t.Fatalf("parallel duplicates without a header ran the handler %d times", n)
		}
		v.cnt.Reset()
		r := call(t, w, derivedEvent(body))
		if r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] != "true" || h.runs.Load() != 1 {
			t.Fatalf("retry: %d %v, %d runs", r.StatusCode, r.Headers, h.runs.Load())
		}
		want := 1 // as for a caller's key: 2 where the engine returns no ALL_OLD
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			want = 2
		}
		if n := v.cnt.Total(); n != want {
			t.Fatalf("a replay of a derived key cost %d round trips, want %d", n, want)
		}
		v.cnt.Reset()
		if r := call(t, w, derivedEvent(`{"order":"ord-`+rnd(8)+`"}`)); r.StatusCode != 201 || h.runs.Load() != 2 {
			t.Fatalf("another derived key: %d, %d runs", r.StatusCode, h.runs.Load())
		}
		if n := v.cnt.Total(); n != 2 {
			t.Fatalf("a first execution of a derived key cost %d round trips, want 2", n)
		}
		v.cnt.Reset()
		if r := call(t, w, derivedEvent(`{"qty":1}`)); r.StatusCode != 400 || v.cnt.Total() != 0 {
			t.Fatalf("no value to derive from: %d %s, %d round trips", r.StatusCode, r.Body, v.cnt.Total())
		}
	})
}

func TestDerivedKeyNeverSharesTheCallersKeyspace(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		h := &countingHandler{}
		derived := derivedGuard(t, v.s, clk, true).HTTPAPI(h.serve)
		caller := derivedGuard(t, v.s, clk, false).HTTPAPI(h.serve)
		key := "k_" + rnd(12)
		body := `{"order":"` + key + `"}`
		a := call(t, caller, guardEvent(key, body))
		b := call(t, derived, derivedEvent(body))
		if a.StatusCode != 201 || b.StatusCode != 201 || b.Headers["Openwop-Idempotent-Replay"] != "" || h.runs.Load() != 2 {
			t.Fatalf("caller key %d, derived key of the same value %d %v: %d runs, want 2", a.StatusCode, b.StatusCode, b.Headers, h.runs.Load())
		}
		rec, found, err := v.s.Get(ctxT(t), keyspace.ID("tenant:acme", "POST /runs", key), v.now)
		if err != nil || !found || rec.State != idem.StateCompleted {
			t.Fatalf("the caller's record: %+v %v %v", rec, found, err)
		}
	})
}
