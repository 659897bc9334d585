package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// TestOpenAPIUnderRIE: the built api function (the bootstrap the stack
// deploys) answers GET /openapi.json with no authorizer context, as API
// Gateway invokes a route without the authorizer: 200 application/json,
// the checked-in functions/api/apifn/openapi.json (compacted), with
// OpenWOP-Version and the discovery document's Cache-Control.
func TestOpenAPIUnderRIE(t *testing.T) {
	f, _ := startRIE(t)
	f.waitUp(t)
	file, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "functions", "api", "apifn", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, file); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	r, err := f.invoke(t, apiEvent("GET", "/openapi.json", "", "", ""))
	must(t, err)
	if r.StatusCode != 200 || r.Headers["Content-Type"] != "application/json" || r.Headers["OpenWOP-Version"] == "" ||
		r.Headers["Cache-Control"] != "public, max-age=300" || r.Body != want.String() {
		t.Fatalf("GET /openapi.json: %d %v %.200s", r.StatusCode, r.Headers, r.Body)
	}
}
