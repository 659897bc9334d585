package dynamostore_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestNetHTTPAnswersReplayByteExact: on every engine, net/http answers at
// the edges of what is stored are replayed as the first client read them:
// an empty body; a body of exactly MaxResponseBytes that is not UTF-8
// (chunked over several items), with a declared trailer and one under
// http.TrailerPrefix, which go out after the body both times, never as
// headers; one byte more is answered once and every retry 410. The
// handler runs once for each.
func TestNetHTTPAnswersReplayByteExact(t *testing.T) {
	big := bytes.Repeat([]byte{0xfe, 0x00, 0xff}, idem.MaxResponseBytes/3+1)
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g, err := idem.New(idem.Config{Tenant: idem.SingleTenant("t"), Store: v.s, Wait: -1,
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name     string
			body     []byte
			trailers bool
			kept     bool
		}{
			{"empty", nil, false, true},
			{"exactly the bound, with trailers", big[:idem.MaxResponseBytes], true, true},
			{"one byte over", big[:idem.MaxResponseBytes+1], false, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				var runs atomic.Int32
				mux := http.NewServeMux()
				mux.Handle("POST /x", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					w.Header().Set("Content-Type", "application/octet-stream")
					if c.trailers {
						w.Header().Set("Trailer", "X-Sum")
					}
					w.WriteHeader(201)
					_, _ = w.Write(c.body)
					if c.trailers {
						w.Header().Set("X-Sum", "abc")
						w.Header().Set(http.TrailerPrefix+"X-More", "def")
					}
				})))
				srv := httptest.NewServer(mux)
				defer srv.Close()
				key := newKey()
				post := func() (*http.Response, []byte) {
					req, _ := http.NewRequest("POST", srv.URL+"/x", strings.NewReader(`{}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", key)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					if err != nil {
						t.Fatal(err)
					}
					return resp, b
				}
				for i := range 2 {
					resp, b := post()
					if i == 1 && !c.kept {
						if resp.StatusCode != 410 {
							t.Fatalf("retry of an answer not kept: %d %.200s", resp.StatusCode, b)
						}
						continue
					}
					if resp.StatusCode != 201 || !bytes.Equal(b, c.body) {
						t.Fatalf("answer %d: %d, %d bytes, want 201 and the %d bytes written", i, resp.StatusCode, len(b), len(c.body))
					}
					if c.trailers && (resp.Trailer.Get("X-Sum") != "abc" || resp.Trailer.Get("X-More") != "def" || resp.Header.Get("X-Sum") != "") {
						t.Fatalf("answer %d: trailers %v, headers %v", i, resp.Trailer, resp.Header)
					}
				}
				if n := runs.Load(); n != 1 {
					t.Fatalf("the handler ran %d times", n)
				}
			})
		}
	})
}
