package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestCodedBodyTheGuardMustReadIs415: a keyed request whose body the
// Guard reads itself (a route with a Contract, or a JSON body it
// canonicalises) sent with a content coding other than identity is
// refused 415 unsupported_media_type naming the coding, before the claim
// (nothing recorded: the same key with the body uncoded then runs), as the
// deployable api host refuses it. Before, a gzip body was 400 "invalid"
// (blaming the client's JSON), and a Contract route read a body labelled
// br as if uncoded. A body the Guard only hashes (not JSON, no Contract)
// is the handler's to decode, and an empty body with a coding is read as
// empty.
func TestCodedBodyTheGuardMustReadIs415(t *testing.T) {
	contract := &idem.Contract{Version: "v1", Decode: func(_ string, b []byte) (any, error) {
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		return v, nil
	}}
	e := newEnv(t, func(cfg *idem.Config) {
		cfg.Tenant = idem.SingleTenant("t")
		cfg.Routes = map[string]idem.Route{"POST /contract": {Contract: contract}}
	})
	runs := 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{}`)
	})
	send := func(op, ctype, coding, body, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/x", strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		if coding != "" {
			req.Header.Set("Content-Encoding", coding)
		}
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		e.guard.Handle(op, handler).ServeHTTP(w, req)
		return w
	}
	gz := string(encodeBody(t, "gzip", `{"a":1}`))
	for i, c := range []struct{ op, coding, body string }{
		{"POST /contract", "gzip", gz},
		{"POST /contract", "br", `{"a":1}`},
		{"POST /contract", "identity, zstd", `{"a":1}`},
		{"POST /json", "gzip", gz},
		{"POST /json", "x-custom", `{"a":1}`},
	} {
		key := testKey + strings.Repeat("x", i)
		w := send(c.op, "application/json", c.coding, c.body, key)
		var env struct{ Error, Message string }
		_ = json.Unmarshal(w.Body.Bytes(), &env)
		if w.Code != 415 || env.Error != "unsupported_media_type" || !strings.Contains(env.Message, "Content-Encoding") ||
			w.Header().Get("Accept-Encoding") != "identity" || runs != 0 {
			t.Fatalf("%s with Content-Encoding %q: %d %s (runs %d), want 415 naming the coding", c.op, c.coding, w.Code, w.Body, runs)
		}
		if w := send(c.op, "application/json", "", `{"a":1}`, key); w.Code != 201 || runs != 1 {
			t.Fatalf("%s: the same key uncoded: %d %s, want it run (the 415 is not recorded)", c.op, w.Code, w.Body)
		}
		runs = 0
	}
	if w := send("POST /blob", "application/octet-stream", "gzip", gz, testKey+"blob"); w.Code != 201 {
		t.Fatalf("a coded body the Guard only hashes: %d %s", w.Code, w.Body)
	}
	if w := send("POST /json", "application/json", "gzip", "", testKey+"empty"); w.Code != 201 {
		t.Fatalf("an empty body with a coding: %d %s", w.Code, w.Body)
	}
}
