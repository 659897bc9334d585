package rawconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// post is a raw request with an X-Key header and a Content-Length body.
func post(key, body string) string {
	return fmt.Sprintf("POST /runs HTTP/1.1\r\nHost: h\r\nX-Key: %s\r\nContent-Length: %d\r\n\r\n%s", key, len(body), body)
}

// chunkedPost is a raw request with an X-Key header, a chunked body of
// chunks (each with an extension) and a trailer.
func chunkedPost(key string, chunks ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST /runs HTTP/1.1\r\nHost: h\r\nX-Key: %s\r\nTransfer-Encoding: chunked\r\n\r\n", key)
	for _, c := range chunks {
		fmt.Fprintf(&b, "%x;POST /runs HTTP/1.1\r\n%s\r\n", len(c), c)
	}
	b.WriteString("0;ext=1\r\nX-Key: trailer\r\n\r\n")
	return b.String()
}

// fakeHead is a body that looks like a request with the key bad.
const fakeHead = "POST /runs HTTP/1.1\r\nHost: h\r\nX-Key: bad\r\nContent-Length: 0\r\n\r\n"

// track feeds wire to a tracker split into reads of size step (0: one
// read) and returns the X-Key of each head queued and whether the framing
// was lost.
func track(t *testing.T, wire string, step int) (keys []string, lost bool) {
	t.Helper()
	var tr tracker
	if step <= 0 {
		step = len(wire)
	}
	for i := 0; i < len(wire); i += step {
		tr.feed([]byte(wire[i:min(i+step, len(wire))]))
		for h, ok := tr.next(); ok; h, ok = tr.next() {
			vs, err := h.Values("x-key")
			if err != nil || len(vs) > 1 {
				t.Fatalf("head %s %s: X-Key %q, %v", h.Method, h.Target, vs, err)
			}
			keys = append(keys, strings.Join(vs, ""))
		}
	}
	return keys, tr.state == stLost
}

func wantKeys(t *testing.T, name, wire string, want ...string) {
	t.Helper()
	for _, step := range []int{0, 1, 7} {
		got, lost := track(t, wire, step)
		if lost || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s (reads of %d bytes): heads %q lost=%v, want %q", name, step, got, lost, want)
		}
	}
}

func TestTrackerContentLengthBodyIsSkipped(t *testing.T) {
	wantKeys(t, "body holding a request", post("k1", fakeHead)+post("k2", ""), "k1", "k2")
}

func TestTrackerChunkedWithExtensionsAndTrailers(t *testing.T) {
	wantKeys(t, "chunked", chunkedPost("k1", fakeHead, "x")+chunkedPost("k2")+post("k3", "{}"), "k1", "k2", "k3")
}

func TestTrackerPipelinedInOrder(t *testing.T) {
	wire := post("k1", "a") + chunkedPost("k2", "bb") + "GET /x HTTP/1.1\r\nX-Key: k3\r\n\r\n" + post("k4", fakeHead) + post("k5", "")
	wantKeys(t, "five pipelined", wire, "k1", "k2", "k3", "k4", "k5")
}

func TestTrackerBodyBiggerThanTheBound(t *testing.T) {
	body := strings.Repeat(fakeHead, 2*MaxHeadBytes/len(fakeHead))
	wantKeys(t, "big Content-Length body", post("k1", body)+post("k2", ""), "k1", "k2")
	wantKeys(t, "big chunked body", chunkedPost("k1", body, body)+post("k2", ""), "k1", "k2")
}

func TestTrackerSkipsEmptyLinesBeforeARequest(t *testing.T) {
	wantKeys(t, "empty lines", "\r\n\r\n"+post("k1", "")+"\r\n"+post("k2", "x"), "k1", "k2")
	wantKeys(t, "bare LF line ends", "POST / HTTP/1.1\nX-Key: k1\nContent-Length: 1\n\nzGET / HTTP/1.1\r\nX-Key: k2\r\n\r\n", "k1", "k2")
}

// TestTrackerLosesFramingForGood: bytes it cannot frame as net/http does
// stop the tracking: the heads before stay, nothing after is guessed.
func TestTrackerLosesFramingForGood(t *testing.T) {
	for name, bad := range map[string]string{
		"two Content-Lengths":       "POST / HTTP/1.1\r\nX-Key: b\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"signed Content-Length":     "POST / HTTP/1.1\r\nX-Key: b\r\nContent-Length: +1\r\n\r\na",
		"gzip Transfer-Encoding":    "POST / HTTP/1.1\r\nX-Key: b\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"chunk size not hex":        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"chunk line bare LF":        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\nx\r\n0\r\n\r\n",
		"chunk data without CRLF":   "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy0\r\n\r\n",
		"folded Content-Length":     "POST / HTTP/1.1\r\nContent-Length: 1\r\n 0\r\n\r\n",
		"header without a colon":    "POST / HTTP/1.1\r\nX-Key b\r\n\r\n",
		"request line of one part":  "POST\r\n\r\n",
		"HTTP/2.0 request line":     "POST / HTTP/2.0\r\n\r\n",
		"header block over the cap": "POST / HTTP/1.1\r\nX-Big: " + strings.Repeat("a", MaxHeadBytes) + "\r\n\r\n",
	} {
		for _, step := range []int{0, 1} {
			got, lost := track(t, post("k1", "")+bad+post("k2", ""), step)
			if !lost || len(got) == 0 || got[0] != "k1" || got[len(got)-1] == "k2" {
				t.Errorf("%s (reads of %d): heads %q lost=%v, want k1 first, never k2, and the framing lost", name, step, got, lost)
			}
		}
	}
}

func TestTrackerHTTP10IgnoresTransferEncoding(t *testing.T) {
	// net/http ignores Transfer-Encoding on HTTP/1.0: the body is the
	// Content-Length's.
	wire := "POST / HTTP/1.0\r\nX-Key: k1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n" + post("k2", "")
	wantKeys(t, "HTTP/1.0", wire, "k1", "k2")
}

func TestHeadValuesAsReceived(t *testing.T) {
	var tr tracker
	tr.feed([]byte("POST /r?q=1 HTTP/1.1\r\nidempotency-key:  k \r\nIdempotency-Key:\tk2\r\nAuthorization: Bearer\r\n x\r\n\r\n"))
	h, ok := tr.next()
	if !ok {
		t.Fatal("no head")
	}
	if h.Method != "POST" || h.Target != "/r?q=1" || h.Proto != "HTTP/1.1" {
		t.Fatalf("request line %q %q %q", h.Method, h.Target, h.Proto)
	}
	if vs, err := h.Values("Idempotency-Key"); err != nil || strings.Join(vs, "|") != " k |\tk2" {
		t.Fatalf("Idempotency-Key %q, %v, want [\" k \" \"\\tk2\"]", vs, err)
	}
	if _, err := h.Values("authorization"); !errors.Is(err, ErrFolded) {
		t.Fatalf("folded Authorization: %v, want ErrFolded", err)
	}
	if vs, err := h.Values("X-None"); err != nil || len(vs) != 0 {
		t.Fatalf("absent header: %q, %v", vs, err)
	}
}

// serve starts a server whose handler answers each request with its X-Key
// values as received (HeadOf), reading the body only when read is set.
func serve(t *testing.T) *httptest.Server {
	t.Helper()
	return serveWith(t, nil)
}

// serveWith is serve with set, when not nil, applied to the server after
// Configure.
func serveWith(t *testing.T, set func(*http.Server)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, err := HeadOf(r.Context())
		if err != nil {
			http.Error(w, "untracked: "+err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Query().Get("read") != "" {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		vs, err := h.Values("X-Key")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, strings.Join(vs, ","))
	}))
	srv.Listener = Listener{srv.Listener}
	Configure(srv.Config)
	if set != nil {
		set(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// roundTrip writes wire on one connection and reads n answers.
func roundTrip(t *testing.T, srv *httptest.Server, wire string, n int) (got []string) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = conn.Write([]byte(wire)) }()
	br := bufio.NewReader(conn)
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSuffix(string(b), "\n")))
	}
	return got
}

// TestServerHandsEachRequestItsOwnHead: pipelined requests — bodies that
// look like requests, chunked, answered without reading the body, OPTIONS *
// — each get their own header block.
func TestServerHandsEachRequestItsOwnHead(t *testing.T) {
	srv := serve(t)
	wire := post("k1", fakeHead) + "OPTIONS * HTTP/1.1\r\nHost: h\r\nX-Key: k2\r\n\r\n" +
		strings.Replace(chunkedPost("k3", fakeHead, "z"), "/runs", "/runs?read=1", 1) +
		post("k4", strings.Repeat(fakeHead, 100)) + "GET /x HTTP/1.1\r\nHost: h\r\nX-Key:  k5 \r\n\r\n"
	got := roundTrip(t, srv, wire, 5)
	want := []string{"200 k1", "200 k2", "200 k3", "200 k4", "200  k5 "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("answers %q, want %q", got, want)
	}
}

// TestServerUntrackedRequestIsClosed: a header block over the bound is not
// guessed: on a server that raised MaxHeaderBytes past what Configure set,
// the request gets ErrUntracked and its connection is closed.
func TestServerUntrackedRequestIsClosed(t *testing.T) {
	srv := serveWith(t, func(s *http.Server) { s.MaxHeaderBytes = 1 << 20 })
	big := "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + strings.Repeat("a", MaxHeadBytes) + "\r\nX-Key: k1\r\n\r\n"
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = conn.Write([]byte(big + post("k2", ""))) }()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "untracked") || !resp.Close {
		t.Fatalf("oversized head: %d %q close=%v, want 400 untracked and the connection closed", resp.StatusCode, b, resp.Close)
	}
	if _, err := http.ReadResponse(br, nil); err == nil {
		t.Fatal("a second answer on the connection of an untracked request")
	}
}

func TestHeadOfOutsideTheServer(t *testing.T) {
	if _, err := HeadOf(context.Background()); !errors.Is(err, ErrNotRaw) {
		t.Fatalf("HeadOf of a plain context: %v, want ErrNotRaw", err)
	}
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("FromContext of a plain context found a Conn")
	}
}

// TestConfigureRefusesWhatItCannotKeep: with Configure's MaxHeaderBytes,
// net/http answers a header block longer than MaxHeadBytes with 431 and
// closes the connection, and one of exactly MaxHeadBytes reaches the
// handler with its Head.
func TestConfigureRefusesWhatItCannotKeep(t *testing.T) {
	srv := serve(t)
	const head = "GET / HTTP/1.1\r\nHost: h\r\nX-Key: k1\r\nX-Pad: "
	fits := MaxHeadBytes - len(head) - len("\r\n\r\n")
	for _, c := range []struct {
		pad    int
		status int
	}{{fits, http.StatusOK}, {fits + 1, http.StatusRequestHeaderFieldsTooLarge}, {4 * MaxHeadBytes, http.StatusRequestHeaderFieldsTooLarge}} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		go func() { _, _ = conn.Write([]byte(head + strings.Repeat("a", c.pad) + "\r\n\r\n")) }()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != c.status || (c.status == http.StatusOK && string(b) != "k1") {
			t.Errorf("a header block of %d bytes: %d %q, want %d", len(head)+c.pad+4, resp.StatusCode, b, c.status)
		}
		if c.status != http.StatusOK && !resp.Close {
			t.Errorf("a header block of %d bytes: the connection stays open after the 431", len(head)+c.pad+4)
		}
	}
}
