package soak

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Faults are the wire faults a Proxy injects, each a probability per
// request (0 ≤ p ≤ 1).
type Faults struct {
	// Delay holds a request for up to MaxDelay before forwarding it.
	Delay    float64
	MaxDelay time.Duration
	// Drop forwards a request, lets the engine apply it, and closes the
	// client's connection without an answer: the write happened and the
	// caller cannot know (the SDK retries it).
	Drop float64
	// Throttle answers ThrottlingException without forwarding (the SDK
	// retries it with backoff).
	Throttle float64
}

// Counts are the faults a Proxy injected.
type Counts struct {
	Requests, Delays, Drops, Throttles int64
}

// Proxy is an HTTP proxy between a DynamoDB client and its engine that
// injects Faults. Its zero Faults forward everything unchanged.
type Proxy struct {
	// URL is the proxy's endpoint (http://127.0.0.1:port).
	URL string

	target string
	client *http.Client
	srv    *http.Server
	ln     net.Listener

	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand

	requests, delays, drops, throttles atomic.Int64
}

// NewProxy listens on a free loopback port and forwards to target (an
// engine's base URL).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:    "http://" + ln.Addr().String(),
		target: strings.TrimRight(target, "/"),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		ln:     ln,
		rng:    rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: time.Minute}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// SetFaults changes the faults injected from the next request on.
func (p *Proxy) SetFaults(f Faults) {
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
}

// Counts returns the faults injected so far.
func (p *Proxy) Counts() Counts {
	return Counts{Requests: p.requests.Load(), Delays: p.delays.Load(), Drops: p.drops.Load(), Throttles: p.throttles.Load()}
}

// Close stops the proxy.
func (p *Proxy) Close() { _ = p.srv.Close() }

// draw decides the faults of one request.
func (p *Proxy) draw() (delay time.Duration, drop, throttle bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.faults
	if f.Delay > 0 && p.rng.Float64() < f.Delay && f.MaxDelay > 0 {
		delay = time.Duration(p.rng.Int64N(int64(f.MaxDelay)))
	}
	throttle = f.Throttle > 0 && p.rng.Float64() < f.Throttle
	drop = !throttle && f.Drop > 0 && p.rng.Float64() < f.Drop
	return delay, drop, throttle
}

// throttleBody is DynamoDB's answer to a throttled request (JSON 1.0
// protocol: the error type in __type and in X-Amzn-ErrorType).
const throttleBody = `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	delay, drop, throttle := p.draw()
	if delay > 0 {
		p.delays.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if throttle {
		p.throttles.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, throttleBody)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Header.Del("Accept-Encoding") // keep the engine's body as is
	resp, err := p.client.Do(out)
	if err != nil {
		// The engine is down or paused past the client's patience: the
		// connection is closed without an answer, as a dead engine does.
		hangUp(w)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || drop {
		if drop {
			p.drops.Add(1)
		}
		hangUp(w)
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(b)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
