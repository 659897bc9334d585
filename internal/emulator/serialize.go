package emulator

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
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
	// A client that hangs up does not stop its request at the backend
	// (moto goes on with a write whose client left): the next request is
	// forwarded only once the backend answered this one, bounded by
	// forwardTimeout, not when the client left. (A context that cannot be
	// cancelled would make the proxy watch the client's connection
	// instead.)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), forwardTimeout)
	defer cancel()
	s.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// forwardTimeout bounds how long the serializer waits for the backend's
// answer to one request, its client gone or not.
const forwardTimeout = 2 * time.Minute

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

// Serializer is a running one-request-at-a-time proxy in front of an
// endpoint that is not linearizable (moto). Stop it with Close.
type Serializer struct {
	// Endpoint is the proxy's base URL.
	Endpoint string
	s        *serializer
}

// Serialize starts a Serializer in front of target (a base URL) on a free
// loopback port. Only requests sent through Serializer.Endpoint are
// serialized; other clients of target are not.
func Serialize(target string) (*Serializer, error) {
	s, ep, err := startSerializer(target)
	if err != nil {
		return nil, err
	}
	return &Serializer{Endpoint: ep, s: s}, nil
}

// Close stops the proxy.
func (s *Serializer) Close() { s.s.close() }

// IsMoto reports whether endpoint is a moto server: its management API
// answers, within 5 s, GET /moto-api/config (moto 4 and later; 200 or 201)
// or else GET /moto-api/data.json (200) with a JSON object. Only the
// object's opening is read: the data dump holds every item of the server,
// megabytes after a few hundred runs, and a server past a limit on it must
// still be moto (RED_TEAM 586). DynamoDB, DynamoDB Local and dynalite
// answer those paths with an error.
func IsMoto(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	base := strings.TrimSuffix(endpoint, "/")
	return answersJSONObject(ctx, base+"/moto-api/config", http.StatusOK, http.StatusCreated) ||
		answersJSONObject(ctx, base+"/moto-api/data.json", http.StatusOK)
}

// answersJSONObject reports whether GET url answers one of statuses with a
// body that opens a JSON object: '{', then a member name or the closing '}'.
// The rest of the body is not read.
func answersJSONObject(ctx context.Context, url string, statuses ...int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if !slices.Contains(statuses, resp.StatusCode) {
		return false
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, 1<<20))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	_, name := tok.(string)
	return name || tok == json.Delim('}')
}
