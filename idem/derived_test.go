package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/idem/keyspace"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// derivedPolicy is the OpenWOP policy with derived keys allowed.
func derivedPolicy() idem.Policy {
	p := idem.PolicyOpenWOP
	p.Name = "derived"
	p.DerivedKeys = true
	return p
}

// orderIDKey derives the key from the body's "orderId" member.
func orderIDKey(body []byte, _ func(string) []string) (string, error) {
	var m struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "", err
	}
	return m.OrderID, nil
}

const derivedRoute = "POST /orders"

func derivedEnv(t *testing.T, derive func([]byte, func(string) []string) (string, error)) *env {
	return newEnv(t, func(c *idem.Config) {
		c.Policy = derivedPolicy()
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
		c.Routes = map[string]idem.Route{derivedRoute: {DeriveKey: derive}}
	})
}

func TestDerivedKeyReplaysWithoutHeader(t *testing.T) {
	t.Run("HTTPAPI", func(t *testing.T) {
		e := derivedEnv(t, orderIDKey)
		h := &handler{}
		first := e.call(h, v2event("POST", derivedRoute, "", `{"orderId":"ord-1","qty":1}`))
		retry := e.call(h, v2event("POST", derivedRoute, "", `{"orderId":"ord-1","qty":1}`))
		if first.StatusCode != 201 || retry.StatusCode != 201 || retry.Body != first.Body {
			t.Fatalf("first %d %s, retry %d %s", first.StatusCode, first.Body, retry.StatusCode, retry.Body)
		}
		if retry.Headers["Openwop-Idempotent-Replay"] != "true" || first.Headers["Openwop-Idempotent-Replay"] != "" {
			t.Fatalf("replay marker: first %v, retry %v", first.Headers, retry.Headers)
		}
		if h.Calls() != 1 {
			t.Fatalf("handler ran %d times, want 1", h.Calls())
		}
		// The same derived key with a different request is a mismatch, as
		// for a caller's key.
		other := e.call(h, v2event("POST", derivedRoute, "", `{"orderId":"ord-1","qty":2}`))
		if other.StatusCode != 409 || !strings.Contains(other.Body, "idempotency_key_mismatch") {
			t.Fatalf("same derived key, other body: %d %s", other.StatusCode, other.Body)
		}
		// Another derived key is another record.
		if r := e.call(h, v2event("POST", derivedRoute, "", `{"orderId":"ord-2","qty":1}`)); r.StatusCode != 201 || h.Calls() != 2 {
			t.Fatalf("other derived key: %d, %d runs", r.StatusCode, h.Calls())
		}
	})
	t.Run("ParallelDuplicates", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) {
			c.Policy = derivedPolicy()
			c.Routes = map[string]idem.Route{derivedRoute: {DeriveKey: orderIDKey}}
			c.Wait = 0 // duplicates wait for the first request's outcome
		})
		h := &handler{}
		var wg sync.WaitGroup
		bodies := make([]string, 16)
		for i := range bodies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, _ := e.guard.HTTPAPI(h.v2)(context.Background(), v2event("POST", derivedRoute, "", `{"orderId":"ord-p"}`))
				bodies[i] = itoa(r.StatusCode) + " " + r.Body
			}()
		}
		wg.Wait()
		if h.Calls() != 1 {
			t.Fatalf("handler ran %d times under parallel duplicates, want 1", h.Calls())
		}
		for _, b := range bodies {
			if b != `201 {"run":"1"}` && !strings.HasPrefix(b, "409 ") {
				t.Fatalf("duplicate answered %s", b)
			}
		}
	})
	t.Run("Middleware", func(t *testing.T) {
		e := derivedEnv(t, func(_ []byte, header func(string) []string) (string, error) {
			if v := header("X-Message-Id"); len(v) == 1 {
				return v[0], nil
			}
			return "", errors.New("no message id")
		})
		runs := 0
		mux := http.NewServeMux()
		mux.HandleFunc(derivedRoute, func(w http.ResponseWriter, r *http.Request) {
			runs++
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"run":"` + itoa(runs) + `"}`))
		})
		srv := e.guard.Middleware(mux)
		do := func(msgID string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("POST", "/orders", bytes.NewBufferString(`{"qty":1}`))
			r.Header.Set("Content-Type", "application/json")
			if msgID != "" {
				r.Header.Set("x-message-id", msgID)
			}
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, r)
			return w
		}
		first, retry := do("m-1"), do("m-1")
		if first.Code != 201 || retry.Code != 201 || retry.Body.String() != first.Body.String() ||
			retry.Header().Get("OpenWOP-Idempotent-Replay") != "true" || runs != 1 {
			t.Fatalf("first %d %s, retry %d %s %v, runs %d", first.Code, first.Body, retry.Code, retry.Body, retry.Header(), runs)
		}
		if w := do(""); w.Code != 400 || !strings.Contains(w.Body.String(), "validation_error") || runs != 1 {
			t.Fatalf("no message id: %d %s, runs %d", w.Code, w.Body, runs)
		}
	})
	t.Run("Do", func(t *testing.T) {
		e := derivedEnv(t, orderIDKey)
		h := &handler{}
		ev := v2event("POST", "$default", "", `{"orderId":"ord-d"}`)
		for range 2 {
			if _, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: derivedRoute},
				func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) { return h.v2(ctx, ev) }); err != nil {
				t.Fatal(err)
			}
		}
		if h.Calls() != 1 {
			t.Fatalf("Do ran the handler %d times, want 1", h.Calls())
		}
	})
}

func TestDerivedKeyRefusedUnderOpenWOP(t *testing.T) {
	for _, p := range []idem.Policy{{}, idem.PolicyOpenWOP, commerce.Policy, erp.Policy} {
		_, err := idem.New(idem.Config{
			Store:  newEnv(t, nil).store,
			Tenant: idem.AuthorizerKey("tenantId"),
			Policy: p,
			Routes: map[string]idem.Route{derivedRoute: {DeriveKey: orderIDKey}},
		})
		var ce *idem.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), `Routes["POST /orders"].DeriveKey`) {
			t.Fatalf("policy %q: New = %v, want a ConfigError naming Routes[...].DeriveKey", p.Name, err)
		}
	}
	if _, err := idem.New(idem.Config{Store: newEnv(t, nil).store, Tenant: idem.AuthorizerKey("tenantId"), Policy: derivedPolicy(),
		Routes: map[string]idem.Route{derivedRoute: {DeriveKey: orderIDKey}}}); err != nil {
		t.Fatalf("policy with DerivedKeys: %v", err)
	}
}

func TestDerivedKeyNeverSharesTheCallersKeyspace(t *testing.T) {
	// Two Guards on one store, one operation and one tenant: one reads the
	// caller's Idempotency-Key, the other derives the key from the body. A
	// caller sending the key X and a derived key X are two records.
	e := derivedEnv(t, orderIDKey)
	caller, err := idem.New(idem.Config{Store: e.store, Tenant: idem.AuthorizerKey("tenantId"), Policy: derivedPolicy(), Wait: -1,
		Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"orderId":"` + testKey + `"}`
	h := &handler{}
	byCaller, _ := caller.HTTPAPI(h.v2)(context.Background(), v2event("POST", derivedRoute, testKey, body))
	derived := e.call(h, v2event("POST", derivedRoute, "", body))
	if byCaller.StatusCode != 201 || derived.StatusCode != 201 || derived.Headers["Openwop-Idempotent-Replay"] != "" || h.Calls() != 2 {
		t.Fatalf("caller %d %s, derived %d %s %v: %d runs, want 2 (separate keyspaces)",
			byCaller.StatusCode, byCaller.Body, derived.StatusCode, derived.Body, derived.Headers, h.Calls())
	}
	// And the reverse order, with another value.
	body2 := `{"orderId":"k_9876543210abcdefghijkl"}`
	e.call(h, v2event("POST", derivedRoute, "", body2))
	back, _ := caller.HTTPAPI(h.v2)(context.Background(), v2event("POST", derivedRoute, "k_9876543210abcdefghijkl", body2))
	if back.StatusCode != 201 || back.Headers["Openwop-Idempotent-Replay"] != "" || h.Calls() != 4 {
		t.Fatalf("caller after derived: %d %v, %d runs, want 4", back.StatusCode, back.Headers, h.Calls())
	}
	// The caller's record is where ScopeID puts it; the derived one is not.
	if _, found, _ := e.store.Get(context.Background(), keyspace.ID("tenant:"+testTenant, derivedRoute, testKey), e.clock.Now()); !found {
		t.Fatal("the caller's record is not at its ScopeID")
	}
	if n := e.store.Len(); n != 4 {
		t.Fatalf("store holds %d records, want 4", n)
	}
}

func TestDerivedKeyRouteRefusesACallersKey(t *testing.T) {
	e := derivedEnv(t, orderIDKey)
	h := &handler{}
	r := e.call(h, v2event("POST", derivedRoute, testKey, `{"orderId":"ord-1"}`))
	if r.StatusCode != 400 || !strings.Contains(r.Body, `"idempotency_key_invalid"`) || !strings.Contains(r.Body, `"not_accepted"`) || h.Calls() != 0 || e.store.Len() != 0 {
		t.Fatalf("caller's key on a derived route: %d %s, %d runs, %d records", r.StatusCode, r.Body, h.Calls(), e.store.Len())
	}
}

func TestDerivedKeyMissingValueRecordsNothing(t *testing.T) {
	e := derivedEnv(t, orderIDKey)
	h := &handler{}
	for _, body := range []string{`{"qty":1}`, `not json`, ``} {
		r := e.call(h, v2event("POST", derivedRoute, "", body))
		if r.StatusCode != 400 || !strings.Contains(r.Body, `"validation_error"`) || h.Calls() != 0 || e.store.Len() != 0 {
			t.Fatalf("body %q: %d %s, %d runs, %d records", body, r.StatusCode, r.Body, h.Calls(), e.store.Len())
		}
	}
}

func TestDerivedKeyNeverInLogsOrResponses(t *testing.T) {
	const secret = "ord-SECRET-4f1c2d"
	e := derivedEnv(t, orderIDKey)
	h := &handler{err: errors.New("downstream refused order " + secret)}
	r := e.call(h, v2event("POST", derivedRoute, "", `{"orderId":"`+secret+`"}`))
	if r.StatusCode != 500 {
		t.Fatalf("status %d", r.StatusCode)
	}
	h.err = nil
	r = e.call(h, v2event("POST", derivedRoute, "", `{"orderId":"`+secret+`"}`))
	if r.StatusCode != 201 {
		t.Fatalf("retry after failure: %d %s", r.StatusCode, r.Body)
	}
	for k, v := range r.Headers {
		if strings.Contains(v, secret) {
			t.Fatalf("response header %s carries the derived key", k)
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, secret) || !strings.Contains(logs, "key_hash") {
		t.Fatalf("logs carry the derived key or no key hash:\n%s", logs)
	}
}
