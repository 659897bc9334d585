package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// The net/http example answers a request no route serves in the error
// envelope every other answer of it uses, not net/http's text (RED_TEAM
// 513): an unknown path is 404 not_found, a known path with another method
// 405 with the vendor code idemkit.method_not_allowed (the registry has no
// 405 row) and the Allow header the ServeMux sets. Both validate against
// error-envelope.schema.json; a registered code carries the registry's
// status. Such a request is never guarded (no record under its key), and
// the route itself is unchanged. Handler behaviour only: the in-memory
// store is enough.
func TestMuxAnswersUnroutedInTheErrorEnvelope(t *testing.T) {
	envelope, err := wireschema.Load(t).Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(shared.Path(t, "openwop", "spec", "v2", "errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		Rows []struct {
			Code       string
			HTTPStatus int
		}
	}
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Fatal(err)
	}
	status := map[string]int{}
	for _, r := range reg.Rows {
		status[r.Code] = r.HTTPStatus
	}
	store := memstore.New()
	guard, err := idem.New(idem.Config{Store: store, Tenant: idem.SingleTenant("orders")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newMux(guard))
	defer srv.Close()
	send := func(method, path, key, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp, got
	}
	for _, c := range []struct {
		method, path, code, allow string
		want                      int
	}{
		{"POST", "/nope", "not_found", "", 404},
		{"GET", "/nope", "not_found", "", 404},
		{"GET", "/orders", "idemkit.method_not_allowed", "POST", 405},
		{"PUT", "/orders", "idemkit.method_not_allowed", "POST", 405},
		{"DELETE", "/orders", "idemkit.method_not_allowed", "POST", 405},
	} {
		for _, key := range []string{"", "unrouted-key-0123456789abcd"} {
			resp, body := send(c.method, c.path, key, `{"item":"pen","qty":2}`)
			if resp.StatusCode != c.want || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Allow") != c.allow {
				t.Errorf("%s %s (key %q): %d %q Allow=%q %s, want %d application/json Allow=%q", c.method, c.path, key,
					resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), body, c.want, c.allow)
				continue
			}
			if err := wireschema.Validate(envelope, body); err != nil {
				t.Errorf("%s %s: %s is not an error envelope: %v", c.method, c.path, body, err)
			}
			var env struct{ Error, Message string }
			_ = json.Unmarshal(body, &env)
			if env.Error != c.code || env.Message == "" {
				t.Errorf("%s %s: %s, want error %q and a message", c.method, c.path, body, c.code)
			}
			if s, registered := status[env.Error]; registered && s != resp.StatusCode {
				t.Errorf("%s %s: %s answered %d, the registry gives %d", c.method, c.path, env.Error, resp.StatusCode, s)
			}
		}
	}
	// HEAD of the route: the 405's status and Allow, no body.
	if resp, body := send("HEAD", "/orders", "", ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || len(body) != 0 {
		t.Errorf("HEAD /orders: %d Allow=%q %q, want 405 Allow=POST and no body", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
	// The route itself: unchanged, guarded (the second is a replay).
	for i := range 2 {
		resp, body := send("POST", "/orders", "routed-key-0123456789abcdef", `{"item":"pen","qty":2}`)
		if resp.StatusCode != 201 || (i == 1) != (resp.Header.Get("Openwop-Idempotent-Replay") == "true") {
			t.Fatalf("POST /orders attempt %d: %d %s %v", i+1, resp.StatusCode, body, resp.Header)
		}
	}
	if resp, body := send("POST", "/orders", "routed-key-bad-body-012345", `{"item":""}`); resp.StatusCode != 400 || !strings.Contains(string(body), `"validation_error"`) {
		t.Errorf("POST /orders with a bad body: %d %s", resp.StatusCode, body)
	}
}
