package soak

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestProxyFaults(t *testing.T) {
	var reached atomic.Int64
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte("ok:"), b...))
	}))
	defer eng.Close()
	p, err := NewProxy(eng.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	post := func() (*http.Response, error) {
		return http.Post(p.URL+"/", "application/x-amz-json-1.0", strings.NewReader("x"))
	}

	// No faults: forwarded unchanged.
	resp, err := post()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok:x" || reached.Load() != 1 {
		t.Fatalf("%q, reached %d", b, reached.Load())
	}

	// Drop: the engine applies it, the client gets no answer.
	p.SetFaults(Faults{Drop: 1})
	if resp, err := post(); err == nil {
		resp.Body.Close()
		t.Fatalf("a dropped request answered %d", resp.StatusCode)
	}
	if reached.Load() != 2 {
		t.Fatalf("reached %d, want the dropped request applied", reached.Load())
	}

	// Throttle: answered ThrottlingException, never forwarded.
	p.SetFaults(Faults{Throttle: 1})
	resp, err = post()
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ThrottlingException" || !strings.Contains(string(b), "ThrottlingException") || reached.Load() != 2 {
		t.Fatalf("%d %q, reached %d", resp.StatusCode, b, reached.Load())
	}

	// Delay: held, then forwarded.
	p.SetFaults(Faults{Delay: 1, MaxDelay: time.Millisecond})
	resp, err = post()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := p.Counts(); c.Requests != 4 || c.Drops != 1 || c.Throttles != 1 || c.Delays != 1 || reached.Load() != 3 {
		t.Fatalf("%+v, reached %d", c, reached.Load())
	}
}
