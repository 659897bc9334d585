package faultrx

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

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

// TestReceiverCountsOnlyItsOwnTestsRequests: a request to the receiver's
// port outside its URL (another test's, on a reused loopback port) is not a
// delivery: not counted, answered 404, listed by Strangers and reported to
// Options.T with the key hashed; deliveries to URL count as before.
func TestReceiverCountsOnlyItsOwnTestsRequests(t *testing.T) {
	rec := &recordingT{TB: t}
	rx := New(Options{T: rec})
	defer rx.Close()
	const key = "stranger-key-0123456789abcdef"
	base := strings.TrimSuffix(rx.URL(), rx.token)
	for _, u := range []string{base + "/hook", rx.URL() + "/hook"} {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if rx.Count() != 1 {
		t.Errorf("counted %d deliveries, want 1 (the stranger's is not one)", rx.Count())
	}
	s := rx.Strangers()
	if len(s) != 1 || !strings.Contains(s[0], "POST /hook") || strings.Contains(s[0], key) {
		t.Errorf("strangers %q, want one naming POST /hook without the raw key", s)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.errs) != 1 {
		t.Errorf("reported %d strangers to the test, want 1", len(rec.errs))
	}
}
