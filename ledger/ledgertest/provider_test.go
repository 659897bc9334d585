package ledgertest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// recordingT is a testing.TB whose Errorf is recorded instead of failing.
type recordingT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingT) Errorf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

// TestProviderCountsOnlyItsOwnTestsRequests: a request reaching the
// provider's port without its test's path token (another test's, on a
// reused loopback port) is not counted and is reported with its method,
// path and headers, the credential masked and the key hashed; the test's
// own calls are counted as before.
func TestProviderCountsOnlyItsOwnTestsRequests(t *testing.T) {
	rec := &recordingT{TB: t}
	p := NewProvider(rec)
	const key = "stranger-key-0123456789abcdef"
	req, _ := http.NewRequest(http.MethodPost, p.srv.URL+"/effects", strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("stranger answered %d, want 404", resp.StatusCode)
	}
	if p.Requests() != 0 || p.Effects() != 0 {
		t.Errorf("stranger counted: %d requests, %d effects", p.Requests(), p.Effects())
	}
	rec.mu.Lock()
	errs := strings.Join(rec.errs, "\n")
	rec.mu.Unlock()
	if len(rec.errs) != 1 || !strings.Contains(errs, "POST /effects") || !strings.Contains(errs, "Authorization: [masked]") {
		t.Errorf("stranger reported as %q, want one report naming POST /effects and the masked credential", errs)
	}
	if strings.Contains(errs, key) || strings.Contains(errs, "s3cret") {
		t.Errorf("stranger report leaks a secret: %q", errs)
	}
	if _, err := p.Call(context.Background(), "own-key-0123456789abcdef", "body"); err != nil {
		t.Fatal(err)
	}
	if p.Requests() != 1 || p.Effects() != 1 {
		t.Errorf("own call: %d requests, %d effects, want 1 and 1", p.Requests(), p.Effects())
	}
}
