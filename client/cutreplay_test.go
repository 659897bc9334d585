package client

import (
	"net/http"
	"testing"
)

// cutWith is cut with response headers (name, value pairs) set first.
func cutWith(code int, partial string, hdr ...string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		cut(code, partial)(w, r)
	}
}

// A replayed answer the client reads to classify (a 5xx, a 409) whose body
// breaks off never arrived whole: the replay marker says a retry under the
// same key meets the same recorded answer, which is exactly why that retry
// is safe, so it is retried like a transport error and the caller gets the
// answer whole, not a final answer whose body fails to read.
func TestCutReplayedAnswerIsRetried(t *testing.T) {
	for _, hdr := range DefaultReplayHeaders {
		for _, c := range []struct {
			code    int
			partial string
			whole   step
			body    string
		}{
			{500, `{"error":"internal_error","mess`, envelope(500, "internal_error", hdr, "true"), `{"error":"internal_error","message":"scripted"}`},
			{503, `{"st`, status(503, hdr, "true"), `{"status":503}`},
			{409, `{"error":"idempotency_key_mismatch","mess`, envelope(409, "idempotency_key_mismatch", hdr, "true"), `{"error":"idempotency_key_mismatch","message":"scripted"}`},
		} {
			s := newScripted(t, cutWith(c.code, c.partial, hdr, "true"), c.whole)
			var w waits
			cl := mustNew(t, fastConfig(&w))
			resp, body, err := post(t, cl, s.srv.URL, `{"a":1}`)
			if err != nil {
				t.Fatalf("%s %d: %v: the cut replay was handed over as final", hdr, c.code, err)
			}
			if resp.StatusCode != c.code || !resp.Replayed || resp.Attempts != 2 || s.count() != 2 || body != c.body {
				t.Fatalf("%s %d: status %d result %+v (server %d) body %q: the cut replay was final", hdr, c.code, resp.StatusCode, resp.Result, s.count(), body)
			}
			sameKeys(t, s, resp.Key)
			sameBodies(t, s, `{"a":1}`)
		}
	}
}
