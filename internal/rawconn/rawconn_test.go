package rawconn

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// pipeConn returns a Conn reading what is written to the returned writer.
func pipeConn(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &Conn{Conn: a}, b
}

func kept(c *Conn) []byte {
	var out []byte
	c.Use(func(k []byte) int { out = append(out, k...); return 0 })
	return out
}

func TestConnKeepsWhatItReadAndDrops(t *testing.T) {
	c, w := pipeConn(t)
	go func() { _, _ = w.Write([]byte("hello world")) }()
	buf := make([]byte, 11)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if got := kept(c); string(got) != "hello world" {
		t.Fatalf("kept %q, want %q", got, "hello world")
	}
	c.Use(func(k []byte) int { return 6 })
	if got := kept(c); string(got) != "world" {
		t.Fatalf("after dropping 6, kept %q, want %q", got, "world")
	}
	c.Use(func(k []byte) int { return 99 })
	if got := kept(c); len(got) != 0 {
		t.Fatalf("after dropping more than kept, kept %q, want nothing", got)
	}
}

func TestConnBoundedOldestDroppedFirst(t *testing.T) {
	c, w := pipeConn(t)
	data := append(bytes.Repeat([]byte("a"), MaxBytes), []byte("tail")...)
	go func() { _, _ = w.Write(data) }()
	if _, err := io.ReadFull(c, make([]byte, len(data))); err != nil {
		t.Fatal(err)
	}
	got := kept(c)
	if len(got) != MaxBytes || !bytes.HasSuffix(got, []byte("tail")) {
		t.Fatalf("kept %d bytes ending %q, want the last %d ending in tail", len(got), got[max(0, len(got)-4):], MaxBytes)
	}
}

func TestServerHandsRequestItsConn(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := FromContext(r.Context())
		if !ok {
			http.Error(w, "no conn", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(kept(c))
	}))
	srv.Listener = Listener{srv.Listener}
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
	req.Header.Set("X-Raw", "v")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !bytes.HasPrefix(body, []byte("GET /x HTTP/1.1\r\n")) || !bytes.Contains(body, []byte("\r\nX-Raw: v\r\n")) {
		t.Fatalf("got %d %q, want the raw request", res.StatusCode, body)
	}
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("FromContext of a plain context found a Conn")
	}
}
