package emulator

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// serializer is a loopback reverse proxy that forwards one request at a
// time: the fix for moto's non-atomic conditional writes (see the package
// doc).
type serializer struct {
	mu    sync.Mutex
	proxy *httputil.ReverseProxy
	srv   *http.Server
}

func (s *serializer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proxy.ServeHTTP(w, r)
}

// startSerializer starts the proxy to target on a free loopback port and
// returns it with its base URL.
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
	s := &serializer{proxy: p}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, "http://" + ln.Addr().String(), nil
}

func (s *serializer) close() {
	if s != nil {
		_ = s.srv.Close()
	}
}
