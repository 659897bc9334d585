package devstack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestGatewayServesOpenAPI: over HTTP, the dev gateway serves GET
// /openapi.json without a credential (and with a wrong one: the route never
// reaches the authorizer), 200 application/json with OpenWOP-Version, the
// discovery document's Cache-Control and an OpenAPI 3.1 document whose
// paths are the route table's; HEAD is the same without a body, and every
// other method, an unserved OpenWOP-Version and If-None-Match get what the
// discovery route gets.
func TestGatewayServesOpenAPI(t *testing.T) {
	discard := slog.New(slog.NewJSONHandler(io.Discard, nil))
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	api, err := apifn.New(apifn.Config{Runs: runs.NewMemRuns(), Guard: g, Ledger: l, BaseURL: "http://dev", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	keys := apikeys.NewMemKeys()
	_ = keys.PutKey(context.Background(), "k1", "acme")
	srv := httptest.NewServer(&gateway{api: api, auth: &authfn.Handler{Keys: keys, Logger: discard}})
	defer srv.Close()
	do := func(method, path string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return r, b
	}

	for _, auth := range []string{"", "Bearer wrong", "Bearer k1"} {
		r, body := do("GET", "/openapi.json", "Authorization", auth)
		var doc struct {
			OpenAPI string                    `json:"openapi"`
			Paths   map[string]map[string]any `json:"paths"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("OpenWOP-Version") != settings.ProtocolVersion || r.Header.Get("Cache-Control") != "public, max-age=300" ||
			!strings.HasPrefix(doc.OpenAPI, "3.1.") {
			t.Fatalf("GET /openapi.json (Authorization %q): %d %v %.200s", auth, r.StatusCode, r.Header, body)
		}
		for _, rt := range apifn.Routes {
			if doc.Paths[rt.Pattern][strings.ToLower(rt.Method)] == nil {
				t.Errorf("the served document lacks %s %s", rt.Method, rt.Pattern)
			}
		}
	}
	for _, c := range []struct {
		method string
		hdr    []string
		status int
	}{
		{"HEAD", nil, 200}, {"POST", nil, 405}, {"DELETE", nil, 405}, {"OPTIONS", nil, 405}, {"get", nil, 405},
		{"GET", []string{"OpenWOP-Version", "3"}, 406}, {"GET", []string{"If-None-Match", "*"}, 200},
	} {
		ds, db := do(c.method, "/.well-known/openwop", c.hdr...)
		ost, ob := do(c.method, "/openapi.json", c.hdr...)
		var de, oe struct{ Error string }
		_ = json.Unmarshal(db, &de)
		_ = json.Unmarshal(ob, &oe)
		if ost.StatusCode != c.status || ds.StatusCode != ost.StatusCode || de.Error != oe.Error || ds.Header.Get("Allow") != ost.Header.Get("Allow") ||
			ds.Header.Get("Content-Type") != ost.Header.Get("Content-Type") || ost.Header.Get("OpenWOP-Version") != settings.ProtocolVersion ||
			(c.method == "HEAD") != (len(ob) == 0) {
			t.Errorf("%s %v: /openapi.json %d %v %q (%d body bytes), /.well-known/openwop %d %v %q; want %d",
				c.method, c.hdr, ost.StatusCode, ost.Header, oe.Error, len(ob), ds.StatusCode, ds.Header, de.Error, c.status)
		}
	}
}
