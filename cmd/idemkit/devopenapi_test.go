package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDevServesOpenAPI: `idemkit dev` serves the host's OpenAPI document
// over HTTP at GET /openapi.json with no credential: 200, the checked-in
// functions/api/apifn/openapi.json (compacted), application/json,
// OpenWOP-Version and the discovery document's Cache-Control, its paths the
// route table's; HEAD is the same without a body; POST, an unserved
// OpenWOP-Version and If-None-Match are answered as on the discovery route.
func TestDevServesOpenAPI(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("devoa%d-", time.Now().UnixNano())
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix)
	file, err := os.ReadFile(filepath.Join("..", "..", "functions", "api", "apifn", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, file); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	do := func(method, path string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
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
	r, body := do("GET", "/openapi.json")
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("OpenWOP-Version") != settings.ProtocolVersion ||
		r.Header.Get("Cache-Control") != "public, max-age=300" || !bytes.Equal(body, want.Bytes()) {
		t.Fatalf("GET /openapi.json: %d %v %.200s", r.StatusCode, r.Header, body)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi %q: %v", doc.OpenAPI, err)
	}
	for _, rt := range apifn.Routes {
		if doc.Paths[rt.Pattern][strings.ToLower(rt.Method)] == nil {
			t.Errorf("the served document lacks %s %s", rt.Method, rt.Pattern)
		}
	}
	for _, c := range []struct {
		method string
		hdr    []string
		status int
	}{
		{"HEAD", nil, 200}, {"POST", nil, 405}, {"GET", []string{"OpenWOP-Version", "1"}, 406}, {"GET", []string{"If-None-Match", "*"}, 200},
	} {
		dr, db := do(c.method, "/.well-known/openwop", c.hdr...)
		or, ob := do(c.method, "/openapi.json", c.hdr...)
		var de, oe struct{ Error string }
		_ = json.Unmarshal(db, &de)
		_ = json.Unmarshal(ob, &oe)
		if or.StatusCode != c.status || dr.StatusCode != or.StatusCode || de.Error != oe.Error || dr.Header.Get("Allow") != or.Header.Get("Allow") ||
			or.Header.Get("OpenWOP-Version") != settings.ProtocolVersion || (c.method == "HEAD") != (len(ob) == 0) {
			t.Errorf("%s %v: /openapi.json %d %v %q, /.well-known/openwop %d %v %q; want %d", c.method, c.hdr,
				or.StatusCode, or.Header, oe.Error, dr.StatusCode, dr.Header, de.Error, c.status)
		}
	}
}
