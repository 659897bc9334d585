package devstack

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestDurabilityAnswerIsCompleteOnceWritten: the durability seam's answer
// is whole on the connection once writeJSON returns (a Content-Length,
// flushed), so a process the seam kills right after answering (at the
// run's first node.started, which can come before the handler returns)
// never leaves the client a cut answer. The handler here dies right
// after writing, without ending the response.
func TestDurabilityAnswerIsCompleteOnceWritten(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{"runId": "acme/r1", "mode": modeDuringExecution})
		panic(http.ErrAbortHandler) // the connection is dropped as a killed process drops it
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the answer was cut (%v; Content-Length %d, Transfer-Encoding %v): %q", err, resp.ContentLength, resp.TransferEncoding, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != http.StatusCreated || m["runId"] != "acme/r1" {
		t.Fatalf("answer: %d %q (%v)", resp.StatusCode, b, err)
	}
}
