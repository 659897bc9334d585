package apifn

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/header"
)

// TestFormRefusalsAreNeverAKeysAnswer pins the reading RED_TEAM CO
// describes: a createRun refused for its form before the Layer-1 claim
// (406 protocol_version_unsupported for an OpenWOP-Version of another
// major, 413 payload_too_large for a body over the bound, 415
// unsupported_media_type for a media type or a content coding the route
// does not read) is answered the same on every send under one key, never
// with OpenWOP-Idempotent-Replay, and the corrected request then sent
// under that key runs (201), neither a replay nor 409
// idempotency_key_mismatch.
func TestFormRefusalsAreNeverAKeysAnswer(t *testing.T) {
	f := newFixture(t)
	valid := `{"workflowId":"conformance-noop"}`
	cases := []struct {
		name   string
		key    string
		status int
		code   string
		adjust func(e map[string]string) string // sets headers, returns the body
	}{
		{"406", "form-refusal-key-406-00000001", http.StatusNotAcceptable, "protocol_version_unsupported", func(h map[string]string) string {
			h["openwop-version"] = "3.0"
			return valid
		}},
		{"413", "form-refusal-key-413-00000001", http.StatusRequestEntityTooLarge, "payload_too_large", func(map[string]string) string {
			return `{"workflowId":"conformance-noop","metadata":{"x":"` + strings.Repeat("a", 300_000) + `"}}`
		}},
		{"415 media type", "form-refusal-key-415-00000001", http.StatusUnsupportedMediaType, "unsupported_media_type", func(h map[string]string) string {
			h["content-type"] = "text/plain"
			return valid
		}},
		{"415 content coding", "form-refusal-key-415-00000002", http.StatusUnsupportedMediaType, "unsupported_media_type", func(h map[string]string) string {
			h["content-encoding"] = "br"
			return valid
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < 2; i++ {
				e := ev("POST", "/runs", "acme", c.key, "")
				e.Body = c.adjust(e.Headers)
				r, m := f.do(t, e)
				if r.StatusCode != c.status || m["error"] != c.code || header.First(r.Headers, "OpenWOP-Idempotent-Replay") != "" {
					t.Fatalf("send %d: %d %v %.200s, want %d %s and no replay marker", i+1, r.StatusCode, r.Headers, r.Body, c.status, c.code)
				}
			}
			r, m := f.do(t, ev("POST", "/runs", "acme", c.key, valid))
			if r.StatusCode != http.StatusCreated || m["runId"] == nil || header.First(r.Headers, "OpenWOP-Idempotent-Replay") != "" {
				t.Fatalf("the corrected request under the key: %d %v %s, want 201, run", r.StatusCode, r.Headers, r.Body)
			}
		})
	}
}
