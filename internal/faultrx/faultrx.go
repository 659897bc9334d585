// Package faultrx is a fault-injecting webhook receiver for tests: an HTTP
// server on loopback that counts every delivery it receives (a request whose
// body it read to the end) and answers each one as a test plan says, the way
// a misbehaving provider would: reset the connection after reading the body,
// close it without answering, hang, answer 500, 503 or 429 with a
// Retry-After, or close idle keep-alive connections between requests.
//
// Deliveries counts what reached the receiver, independently of the sender,
// so a test can compare it with what the sender recorded (the effects
// witness). It counts only its own test's requests: URL carries a path
// token fresh for each receiver, and a request without it (another test's,
// reaching a loopback port that test had freed) is answered 404, not
// counted, and reported (Strangers, and Options.T's Errorf when set) with
// its method, path and headers, credentials masked and keys hashed.
package faultrx

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/stranger"
)

// Fault is how the receiver answers one delivery.
type Fault struct {
	// Status is the status answered (default 200). Ignored by Reset, Close
	// and Hang.
	Status int
	// RetryAfter, if set, is sent as the Retry-After header.
	RetryAfter string
	// Body, if set, is sent as the answer's body, as application/json.
	Body string
	// Reset resets the connection (TCP RST) after reading the body, without
	// answering.
	Reset bool
	// Close closes the connection (FIN) after reading the body, without
	// answering.
	Close bool
	// Hang holds the request after reading the body until the sender gives
	// up or the receiver is closed.
	Hang bool
	// Delay holds the answer this long after reading the body (a slow
	// receiver, or a loaded machine), or until the sender gives up.
	Delay time.Duration
}

// Common faults.
var (
	OK             = Fault{Status: http.StatusOK}
	ResetAfterBody = Fault{Reset: true}
	CloseAfterBody = Fault{Close: true}
	Hang           = Fault{Hang: true}
	Status500      = Fault{Status: http.StatusInternalServerError}
	Status503      = Fault{Status: http.StatusServiceUnavailable}
)

// TooMany is a 429 with Retry-After set to retryAfter (seconds or an
// HTTP-date).
func TooMany(retryAfter string) Fault {
	return Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter}
}

// Delivery is one request the receiver read to the end.
type Delivery struct {
	// N is the delivery's number, from 1.
	N int
	// Key is its Idempotency-Key header.
	Key string
	// Body is the request body.
	Body []byte
	// At is when it was received (the receiver's wall clock).
	At time.Time
	// Reused is true when it came on a connection that had carried an
	// earlier request.
	Reused bool
}

// Receiver is the fault-injecting server. Safe for concurrent use.
type Receiver struct {
	srv  *httptest.Server
	plan func(n int) Fault
	// closeIdle closes every connection as soon as it turns idle after a
	// response, so a keep-alive sender finds it dead at its next request.
	closeIdle bool

	token string
	t     testing.TB

	mu        sync.Mutex
	strangers []string
	got       []Delivery
	addrs     map[string]bool
	hang      chan struct{}
}

// Options configure New.
type Options struct {
	// Plan answers the n-th delivery (from 1). Default: always OK.
	Plan func(n int) Fault
	// CloseIdle closes each keep-alive connection once its response is
	// written and it turns idle, between one request and the next.
	CloseIdle bool
	// T, when set, is told of every request not sent to URL (t.Errorf).
	// Default nil: such requests are only listed by Strangers.
	T testing.TB
}

// New starts a receiver. Close it when done.
func New(o Options) *Receiver {
	r := &Receiver{plan: o.Plan, closeIdle: o.CloseIdle, addrs: map[string]bool{}, hang: make(chan struct{}), token: stranger.Token(), t: o.T}
	if r.plan == nil {
		r.plan = func(int) Fault { return OK }
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateIdle && r.closeIdle {
			_ = c.Close()
		}
	}
	r.srv.Start()
	return r
}

// Always returns a plan answering every delivery with f.
func Always(f Fault) func(int) Fault { return func(int) Fault { return f } }

// Sequence returns a plan answering the n-th delivery with fs[n-1], and
// every later one with the last of fs.
func Sequence(fs ...Fault) func(int) Fault {
	return func(n int) Fault {
		if n-1 < len(fs) {
			return fs[n-1]
		}
		return fs[len(fs)-1]
	}
}

// URL is the receiver's base URL (its path token included): deliveries go
// to it or to paths under it.
func (r *Receiver) URL() string { return r.srv.URL + r.token }

// Strangers describes every request received that was not sent to URL.
func (r *Receiver) Strangers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.strangers...)
}

// Close stops the receiver (and releases hanging requests).
func (r *Receiver) Close() {
	r.mu.Lock()
	select {
	case <-r.hang:
	default:
		close(r.hang)
	}
	r.mu.Unlock()
	r.srv.CloseClientConnections()
	r.srv.Close()
}

// Deliveries returns every delivery received so far, in order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Count is len(Deliveries()).
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if !stranger.Own(req, r.token) {
		d := stranger.Describe(req)
		r.mu.Lock()
		r.strangers = append(r.strangers, d)
		r.mu.Unlock()
		if r.t != nil {
			r.t.Errorf("faultrx: the receiver of %s received a request not sent by its test (not counted): %s", r.t.Name(), d)
		}
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // not a delivery: the body never arrived whole
	}
	r.mu.Lock()
	n := len(r.got) + 1
	// Connection reuse is told by the remote address: a fresh connection
	// has a fresh ephemeral port.
	reused := r.addrs[req.RemoteAddr]
	r.addrs[req.RemoteAddr] = true
	r.got = append(r.got, Delivery{N: n, Key: req.Header.Get("Idempotency-Key"), Body: body, At: time.Now(), Reused: reused})
	f := r.plan(n)
	hang := r.hang
	r.mu.Unlock()
	switch {
	case f.Reset, f.Close:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("faultrx: connection cannot be hijacked")
		}
		c, _, err := hj.Hijack()
		if err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok && f.Reset {
			_ = tc.SetLinger(0) // close sends RST
		}
		_ = c.Close()
	case f.Hang:
		select {
		case <-hang:
		case <-req.Context().Done():
		}
	default:
		if f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-req.Context().Done():
				return
			}
		}
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		st := f.Status
		if st == 0 {
			st = http.StatusOK
		}
		if f.Body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(st)
		if f.Body != "" {
			_, _ = io.WriteString(w, f.Body)
		}
	}
}
