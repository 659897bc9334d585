package client

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
)

// stepClock is a fake clock that the client's Sleep advances; crossing at
// it calls fire once (outside the lock).
type stepClock struct {
	mu    sync.Mutex
	t     time.Time
	at    time.Time
	fired bool
	fire  func()
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	fire := !c.fired && !c.t.Before(c.at)
	c.fired = c.fired || fire
	c.mu.Unlock()
	if fire {
		c.fire()
	}
	return ctx.Err()
}

// slowFirst is a guarded POST /orders/{id}/refund (tenant "shop", a
// memstore, Wait -1) whose first request, sent with key, is running: its
// handler is blocked until free, or until the injected clock clk reaches
// start + 8 s, where the client's Sleep frees it and waits for the first
// answer.
type slowFirst struct {
	start     time.Time
	clk       *stepClock
	key, url  string        // url is the server's, with the path given
	free      func()        // lets the first request's handler answer
	firstDone chan struct{} // closed once the first answer is read
	first     string        // the first answer's body, once firstDone is closed
	runs      int           // the handler's runs
}

// newSlowFirst starts the server under policy p and its first request, and
// returns once the handler is running.
func newSlowFirst(t *testing.T, p idem.Policy, path string) *slowFirst {
	t.Helper()
	f := &slowFirst{start: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), firstDone: make(chan struct{})}
	release, started := make(chan struct{}), make(chan struct{})
	f.clk = &stepClock{t: f.start, at: f.start.Add(8 * time.Second)}
	var once sync.Once
	f.free = func() { once.Do(func() { close(release) }) }
	f.clk.fire = func() { f.free(); <-f.firstDone }
	g, err := idem.New(idem.Config{
		Store: memstore.New(), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: f.clk.Now}}, Wait: -1, Policy: p,
		Tenant: idem.SingleTenant("shop"), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/refund", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.runs++
		close(started)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"refund":"rf_1"}`)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(f.free) // before srv.Close: a failing test must not leave the first request blocked
	f.key = NewKey()
	f.url = srv.URL + path

	go func() {
		defer close(f.firstDone)
		req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`{"reason":"late"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", f.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		f.first = string(b)
	}()
	<-started
	return f
}
