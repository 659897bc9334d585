package idem_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testutil"
)

// writerAnswer is what a client read of one answer.
type writerAnswer struct {
	status  int
	header  http.Header
	trailer http.Header
	body    string
}

// writerServer serves h at POST /x behind the Guard's Middleware (on a
// ServeMux, with outer wrapping the mux when given), counting its runs.
func writerServer(t *testing.T, h http.HandlerFunc, outer func(http.Handler) http.Handler) (url string, calls *atomic.Int32) {
	t.Helper()
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	calls = new(atomic.Int32)
	mux := http.NewServeMux()
	mux.Handle("POST /x", e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		h(w, r)
	})))
	var root http.Handler = mux
	if outer != nil {
		root = outer(mux)
	}
	srv := httptest.NewServer(root)
	t.Cleanup(srv.Close)
	return srv.URL + "/x", calls
}

// writerPost sends POST url with the test key and body, and reads the
// whole answer (failing on a transport error: a broken answer).
func writerPost(t *testing.T, url, body string) writerAnswer {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v (read %q)", err, b)
	}
	return writerAnswer{resp.StatusCode, resp.Header, resp.Trailer, string(b)}
}

// TestFlushingHandlerRunsOnce: a handler that flushes its answer as it
// goes (w.(http.Flusher), as net/http's own writer allows, or
// http.ResponseController) ran, then panicked on the Guard's writer,
// which did not flush: its work was done, its record released as for any
// panic, and every retry ran it again. Under the Guard the answer is
// buffered whole; a flush sends nothing early and the handler runs once.
func TestFlushingHandlerRunsOnce(t *testing.T) {
	for name, flush := range map[string]func(http.ResponseWriter) error{
		"Flusher": func(w http.ResponseWriter) error { w.(http.Flusher).Flush(); return nil },
		"ResponseController": func(w http.ResponseWriter) error {
			return http.NewResponseController(w).Flush()
		},
	} {
		t.Run(name, func(t *testing.T) {
			url, calls := writerServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				_, _ = io.WriteString(w, `{"part":1`)
				if err := flush(w); err != nil {
					_, _ = io.WriteString(w, `,"flush":"`+err.Error()+`"`)
				}
				_, _ = io.WriteString(w, `,"part2":2}`)
			}, nil)
			first := writerPost(t, url, `{}`)
			if first.status != 201 || first.body != `{"part":1,"part2":2}` {
				t.Fatalf("first answer %d %q, want 201 and the whole body", first.status, first.body)
			}
			again := writerPost(t, url, `{}`)
			if again.status != 201 || again.body != first.body || again.header.Get(idem.HeaderOpenWOPReplay) != "true" {
				t.Fatalf("retry %d %q %v, want the first answer replayed", again.status, again.body, again.header)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("the handler ran %d times", n)
			}
		})
	}
}

// TestResponseControllerDeadlinesReachTheConnection: a handler that
// extends its write (or read) deadline through http.ResponseController,
// as one that runs long behind a server's WriteTimeout does, got
// http.ErrNotSupported from the Guard's writer, though net/http's
// supports it. The deadlines are set on the connection the Guard answers
// on.
func TestResponseControllerDeadlinesReachTheConnection(t *testing.T) {
	url, calls := writerServer(t, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Hour)); err != nil {
			http.Error(w, "write deadline: "+err.Error(), 500)
			return
		}
		if err := rc.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
			http.Error(w, "read deadline: "+err.Error(), 500)
			return
		}
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}, nil)
	first := writerPost(t, url, `{}`)
	if first.status != 201 {
		t.Fatalf("first answer %d %q, want 201", first.status, first.body)
	}
	if again := writerPost(t, url, `{}`); again.status != 201 || again.body != first.body {
		t.Fatalf("retry %d %q, want the first answer", again.status, again.body)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestBodyShortOfItsContentLengthIsNotKeptAsComplete: a handler that
// declares a Content-Length and writes fewer bytes (a copy from another
// service that broke off) or more gives a broken answer: net/http cuts
// the connection, and its client sees the body end early. The Guard
// answered the bytes written, 200 with a Content-Length of their own, and
// kept them as the complete answer, replayed as such for the retention.
// The handler ran to its end, its work done: the answer is one the Guard
// cannot read, recorded as not kept (the caller gets 500 saying it is not
// run again, a retry 410), never replayed cut short.
func TestBodyShortOfItsContentLengthIsNotKeptAsComplete(t *testing.T) {
	for name, body := range map[string]string{"short": `{"a":1}`, "long": `{"a":1,"b":2,"c":3,"d":4}`} {
		t.Run(name, func(t *testing.T) {
			url, calls := writerServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "20")
				_, _ = io.WriteString(w, body)
			}, nil)
			first := writerPost(t, url, `{}`)
			if first.status != 500 || !strings.Contains(first.body, "not run again") {
				t.Fatalf("first answer %d %q, want 500 saying the request is not run again", first.status, first.body)
			}
			again := writerPost(t, url, `{}`)
			if again.status != 410 || !strings.Contains(again.body, "response_not_kept") {
				t.Fatalf("retry %d %q, want 410 response_not_kept", again.status, again.body)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("the handler ran %d times", n)
			}
		})
	}
	t.Run("matching", func(t *testing.T) {
		url, _ := writerServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "7")
			_, _ = io.WriteString(w, `{"a":1}`)
		}, nil)
		if first := writerPost(t, url, `{}`); first.status != 200 || first.body != `{"a":1}` {
			t.Fatalf("first answer %d %q", first.status, first.body)
		}
		if again := writerPost(t, url, `{}`); again.status != 200 || again.body != `{"a":1}` {
			t.Fatalf("retry %d %q", again.status, again.body)
		}
	})
}

// TestMaxBytesReaderInFrontIs413: behind http.MaxBytesReader (the
// program's own bound on request bodies, below the Guard's), a body over
// the bound was refused 400 validation_error "could not be read", though
// nothing was wrong with it but its size.
func TestMaxBytesReaderInFrontIs413(t *testing.T) {
	url, calls := writerServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, 16)
			next.ServeHTTP(w, r)
		})
	})
	got := writerPost(t, url, `{"a":"`+string(bytes.Repeat([]byte("x"), 64))+`"}`)
	if got.status != 413 || !strings.Contains(got.body, "payload_too_large") {
		t.Fatalf("answer %d %q, want 413 payload_too_large", got.status, got.body)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	if ok := writerPost(t, url, `{}`); ok.status != 200 {
		t.Fatalf("a body within the bound: %d %q", ok.status, ok.body)
	}
}

// TestTrailersAreReplayedAsTrailers: a handler that declares a trailer
// ("Trailer: X-Sum") and sets it after its body, or sets one under
// http.TrailerPrefix, sends it to a plain net/http client as a trailer;
// behind the Guard it went out (and was replayed) as a header, with a
// Content-Length, so a client reading Response.Trailer found nothing. A
// header set after the body, which net/http never sends, went out and was
// replayed too. The first answer and the replay carry what net/http sends
// without the Guard.
func TestTrailersAreReplayedAsTrailers(t *testing.T) {
	handler := func(w http.ResponseWriter, r *http.Request) {
		h := w.Header() // kept, and changed after the body too
		h.Set("Content-Type", "application/json")
		h.Set("Trailer", "X-Sum")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"a":1}`)
		w.Header().Set("X-Sum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-Late-Trailer", "def")
		w.Header().Set("X-Late", "never sent")
		h.Set("X-Later", "never sent either")
	}
	check := func(name string, got writerAnswer) {
		t.Helper()
		if got.status != 201 || got.body != `{"a":1}` {
			t.Fatalf("%s: %d %q", name, got.status, got.body)
		}
		if got.trailer.Get("X-Sum") != "abc" || got.trailer.Get("X-Late-Trailer") != "def" {
			t.Fatalf("%s: trailers %v, headers %v; want X-Sum and X-Late-Trailer as trailers", name, got.trailer, got.header)
		}
		for _, h := range []string{"X-Sum", "X-Late", "X-Later", "X-Late-Trailer", http.TrailerPrefix + "X-Late-Trailer"} {
			if v, ok := got.header[h]; ok {
				t.Fatalf("%s: header %s: %q went out as a header", name, h, v)
			}
		}
	}
	// What net/http sends without the Guard (a body it writes whole at
	// once: chunked, with its trailers).
	plain := httptest.NewServer(http.HandlerFunc(handler))
	t.Cleanup(plain.Close)
	check("without the Guard", writerPost(t, plain.URL, `{}`))

	url, calls := writerServer(t, handler, nil)
	check("first answer", writerPost(t, url, `{}`))
	again := writerPost(t, url, `{}`)
	check("replay", again)
	if again.header.Get(idem.HeaderOpenWOPReplay) != "true" {
		t.Fatalf("no replay: %v", again.header)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestBodyThatStopsArrivingIs408: behind a server with a ReadTimeout, a
// request whose body stops arriving was refused 400 validation_error
// "could not be read", an answer a retrying client takes as final,
// though nothing was wrong with the body but that it did not arrive. It
// is 408 idemkit.request_timeout, the connection closed; the handler
// does not run and nothing is recorded, so the same request sent again
// runs.
func TestBodyThatStopsArrivingIs408(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.Handle("POST /x", e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})))
	srv := httptest.NewUnstartedServer(mux)
	// The body below never arrives whole: the read ends at this timeout
	// whatever the machine's speed. The head and the part of the body are
	// written before the server accepts the connection, so that its read
	// starts with them there (a client paused 250 ms after its dial
	// failed the test with its request unanswered).
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Listener.Close()
	ln := testutil.NewGatedListener(t)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	conn := ln.DialWritten(t, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: "+testKey+
		"\r\nContent-Length: 100\r\n\r\n"+`{"a":"part of it`)
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a bound on a hang, not a verdict
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), idem.CodeRequestTimeout) || !resp.Close {
		t.Fatalf("answer %d %v %q, want 408 %s with Connection: close", resp.StatusCode, resp.Header, b, idem.CodeRequestTimeout)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	ln.Open()
	if ok := writerPost(t, srv.URL+"/x", `{}`); ok.status != 200 || ok.header.Get(idem.HeaderOpenWOPReplay) == "true" {
		t.Fatalf("the request sent again: %d %v %q, want it run", ok.status, ok.header, ok.body)
	}
}

// countingReader is n bytes of 'a', counting what is read of it.
type countingReader struct {
	n    int64
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	left := c.n - c.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	for i := range p {
		p[i] = 'a'
	}
	c.read.Add(int64(len(p)))
	return len(p), nil
}

// TestBodyDeclaredOverTheBoundIsRefusedUnread: a request that declares a
// body over MaxRequestBytes and waits for 100 Continue was told to send it
// (the Guard read it to its bound before refusing it 413), so its client
// uploaded 6 MB to be refused. It is refused 413 payload_too_large before
// a byte of it is read: no 100 Continue, nothing sent.
func TestBodyDeclaredOverTheBoundIsRefusedUnread(t *testing.T) {
	url, calls := writerServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}, nil)
	body := &countingReader{n: idem.MaxRequestBytes + 1}
	req, _ := http.NewRequest("POST", url, body)
	req.ContentLength = body.n
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", testKey)
	req.Header.Set("Expect", "100-continue")
	// The client waits for the server's word before sending the body, as
	// long as the test may run: the body goes out only if the server asks.
	tr := &http.Transport{ExpectContinueTimeout: time.Hour}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "payload_too_large") {
		t.Fatalf("answer %d %q, want 413 payload_too_large", resp.StatusCode, b)
	}
	if n := body.read.Load(); n != 0 {
		t.Fatalf("the client sent %d bytes of a body refused for its declared size", n)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestTrailersInsideLambdaGoOutAsHeaders: inside a Lambda invocation
// (behind aws-lambda-go-api-proxy, or a function URL) an answer is one
// payload with no trailers: a handler's trailers go out, first and on the
// replay, as the headers the proxy makes of them without the Guard, never
// under a name with http.TrailerPrefix, which is no header name.
func TestTrailersInsideLambdaGoOutAsHeaders(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.Handle("POST /x", e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Trailer", "X-Sum")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"a":1}`)
		w.Header().Set("X-Sum", "abc")
		w.Header().Set(http.TrailerPrefix+"X-More", "def")
	})))
	for i := range 2 {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("aws-%d", i)})
		req := httptest.NewRequestWithContext(ctx, "POST", "/x", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", testKey)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != 201 || rec.Body.String() != `{"a":1}` || rec.Header().Get("X-Sum") != "abc" || rec.Header().Get("X-More") != "def" {
			t.Fatalf("answer %d: %d %q %v", i, rec.Code, rec.Body.String(), rec.Header())
		}
		for k := range rec.Header() {
			if strings.HasPrefix(k, http.TrailerPrefix) {
				t.Fatalf("answer %d: header %q", i, k)
			}
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestHandlerThatBailsOnItsClientsHangUpRunsAgain: a handler that, its
// client gone, returns without a word (the idiom for a cancelled request
// context: nothing done, nothing to say) was recorded as answering 200
// with an empty body, which every retry got replayed: the caller took the
// work for done, and it never was. An answer nothing was written to,
// under a request context that ended (its client hung up; a deadline a
// middleware set passed), is the context's: the record is released and
// the retry runs the handler. A handler that answered before returning
// is recorded as it answered.
func TestHandlerThatBailsOnItsClientsHangUpRunsAgain(t *testing.T) {
	for _, c := range []struct {
		answers, deadline bool
	}{{false, false}, {true, false}, {false, true}} {
		answers := c.answers
		t.Run(fmt.Sprintf("answered=%t,deadline=%t", c.answers, c.deadline), func(t *testing.T) {
			e := newEnv(t, func(c *idem.Config) {
				c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
			})
			var calls atomic.Int32
			entered, served := make(chan struct{}), make(chan struct{}, 2)
			mux := http.NewServeMux()
			mux.Handle("POST /x", e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					close(entered)
					<-r.Context().Done()
					if answers {
						w.WriteHeader(202) // its work done all the same
					}
					return
				}
				w.WriteHeader(201)
			})))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.deadline && calls.Load() == 0 {
					// A deadline a middleware sets (as http.TimeoutHandler
					// does), which the first run waits out whatever the
					// machine's speed.
					ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
					defer cancel()
					r = r.WithContext(ctx)
				}
				mux.ServeHTTP(w, r)
				served <- struct{}{} // the Guard has answered: its record written
			}))
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/x", strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", testKey)
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_ = resp.Body.Close()
				}
				done <- err
			}()
			<-entered
			if !c.deadline {
				cancel() // the client hangs up
			}
			<-served
			cancel()
			<-done
			again := writerPost(t, srv.URL+"/x", `{}`)
			switch {
			case answers && (again.status != 202 || again.header.Get(idem.HeaderOpenWOPReplay) != "true" || calls.Load() != 1):
				t.Fatalf("retry %d %v, %d runs; want the 202 replayed, one run", again.status, again.header, calls.Load())
			case !answers && (again.status != 201 || again.header.Get(idem.HeaderOpenWOPReplay) == "true" || calls.Load() != 2):
				t.Fatalf("retry %d %v %q, %d runs; want the handler run again (201)", again.status, again.header, again.body, calls.Load())
			}
		})
	}
}
