package devstack

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDevGatewaySecurity: `idemkit dev`'s gateway runs the authorizer's own
// Lambda handler on the request as API Gateway presents it, so what the
// deployed stack refuses it refuses (a second Authorization header, a
// non-Bearer scheme, an unknown key: 401); the tenant comes from the
// credential, never from a body or header; and no API key or
// Idempotency-Key, valid or not, reaches a log line or is echoed in an
// error.
func TestDevGatewaySecurity(t *testing.T) {
	const (
		marker   = "S3CR3T"
		apiKey   = "idk_" + marker + "-dev-key-0123456789"
		wrongKey = "idk_" + marker + "-wrong-0123456789"
		idemKey  = marker + "-dev-idem-key-0123456789"
	)
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	runs := runs.NewMemRuns()
	api, err := apifn.New(apifn.Config{Runs: runs, Guard: g, Ledger: l, BaseURL: "http://dev", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	keys := apikeys.NewMemKeys()
	_ = keys.PutKey(context.Background(), apiKey, "acme")
	srv := httptest.NewServer(&gateway{api: api, auth: &authfn.Handler{Keys: keys, Logger: logger}})
	defer srv.Close()

	send := func(method, path string, auth []string, key, body string, extra ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range auth {
			req.Header.Add("Authorization", a)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(extra); i += 2 {
			req.Header.Set(extra[i], extra[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 && strings.Contains(string(b), marker) {
			t.Fatalf("%s %s: error echoes a secret: %d %s", method, path, resp.StatusCode, b)
		}
		return resp, string(b)
	}
	noop := `{"workflowId":"conformance-noop","tenantId":"globex"}`
	for _, auth := range [][]string{
		nil, {"Bearer " + wrongKey}, {"Basic " + apiKey}, {apiKey}, {"Bearer  " + apiKey + " x"},
		{"Bearer " + apiKey, "Bearer " + wrongKey}, {"Bearer " + apiKey, "Bearer " + apiKey},
	} {
		r, b := send("POST", "/runs", auth, "", noop)
		if r.StatusCode != http.StatusUnauthorized || !strings.Contains(b, "unauthenticated") {
			t.Errorf("Authorization %q: %d %s", auth, r.StatusCode, b)
		}
		// A 401 names the scheme to use (RFC 9110 §11.6.1).
		if got := r.Header.Get("WWW-Authenticate"); got != `Bearer realm="idemkit"` {
			t.Errorf("Authorization %q: WWW-Authenticate %q", auth, got)
		}
	}
	if runs.Len() != 0 {
		t.Fatalf("%d runs created without a valid credential", runs.Len())
	}
	r, b := send("POST", "/runs", []string{"Bearer " + apiKey}, idemKey, noop, "X-Tenant-Id", "globex")
	if r.StatusCode != http.StatusCreated || !strings.Contains(b, `"runId":"acme/`) {
		t.Fatalf("createRun: %d %s", r.StatusCode, b)
	}
	if r, b := send("POST", "/runs", []string{"Bearer " + apiKey}, idemKey, `{"workflowId":"conformance-delay"}`); r.StatusCode != http.StatusConflict {
		t.Fatalf("mismatch: %d %s", r.StatusCode, b)
	}
	if r, b := send("POST", "/runs", []string{"Bearer " + apiKey}, marker+" not a valid key 0123456789", noop); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("invalid key: %d %s", r.StatusCode, b)
	}
	// HEAD on a run route reaches the api handler without the authorizer
	// (as the deployed $default route does): still 401.
	if r, _ := send("HEAD", "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz", nil, "", ""); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("HEAD without a credential: %d", r.StatusCode)
	}
	out := logs.String()
	if out == "" {
		t.Fatal("nothing was logged: the test proves nothing")
	}
	if i := strings.Index(out, marker); i >= 0 {
		t.Fatalf("logs carry a secret: ...%s...", out[max(0, i-200):min(len(out), i+80)])
	}
}
