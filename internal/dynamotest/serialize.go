package dynamotest

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// serializer is a loopback reverse proxy that forwards one request at a time.
//
// moto is not linearizable under concurrency: its conditional writes check
// and apply in separate steps without a per-item lock, and with 32
// concurrent conditional UpdateItem calls on one item two of them were seen
// to succeed (TestConditionalWritesAreAtomic reproduces it without the
// proxy). DynamoDB guarantees that exactly one wins, and the exactly-once
// tests depend on it, so moto is always reached through this proxy. moto
// handles requests essentially one at a time anyway (Python GIL), so the
// cost is small.
type serializer struct {
	mu    sync.Mutex
	proxy *httputil.ReverseProxy
	srv   *http.Server
	ln    net.Listener
}

func (s *serializer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proxy.ServeHTTP(w, r)
}

// startSerializer starts the proxy to target and returns its base URL.
func startSerializer(target string) (*serializer, string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	s := &serializer{proxy: p, ln: ln}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, "http://" + ln.Addr().String(), nil
}

func (s *serializer) close() {
	if s != nil {
		_ = s.srv.Close()
	}
}
