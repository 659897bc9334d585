package client

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Calls cancelled in the middle of a backoff (the real timer, not an
// injected Sleep) end at once with the context's error, in a *Error
// carrying the key, and leave no goroutine behind: the budget timer, the
// wait's timer and the attempts' contexts are all released. One Client is
// shared by every call. Each call is cancelled 200 ms after the server
// answered its attempt (a 503 with an hour's Retry-After), not 200 ms
// after it began: on a loaded machine a call may not reach the server in
// 200 ms (32 dial at once), and one cancelled before its attempt was sent
// failed the test's count of attempts.
func TestCancelledMidBackoffLeavesNothingRunning(t *testing.T) {
	const n = 32
	answered := make([]chan struct{}, n)
	for i := range answered {
		answered[i] = make(chan struct{})
	}
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		status(503, "Retry-After", "3600")(w, r)
		if i, err := strconv.Atoi(r.Header.Get("X-Caller")); err == nil && i >= 0 && i < n {
			close(answered[i])
		}
	})
	c := mustNew(t, Config{MaxElapsed: 2 * time.Hour, Base: &http.Transport{}})
	defer c.HTTPClient().Transport.(*Transport).Config.Base.(*http.Transport).CloseIdleConnections()
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader(`{"a":1}`))
			req.Header.Set("X-Caller", strconv.Itoa(i))
			go func() {
				select {
				case <-answered[i]:
					time.Sleep(200 * time.Millisecond) // into the hour's backoff
				case <-time.After(time.Minute): // a hang guard: the count below fails it
				}
				cancel()
			}()
			start := time.Now()
			_, err := c.Do(req)
			var ce *Error
			if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) || ce.Attempts != 1 || ce.Key == "" {
				errs <- err
			}
			if time.Since(start) > time.Minute {
				errs <- errors.New("the cancelled call did not end at once")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("err %v", err)
	}
	c.HTTPClient().Transport.(*Transport).Config.Base.(*http.Transport).CloseIdleConnections()
	// The goroutines wind down (the server's connections among them); a
	// minute bounds a leak, however slowly a loaded machine runs them out.
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the calls, %d before:\n%s", g, before, buf[:runtime.Stack(buf, true)])
	}
	if s.count() != n {
		t.Fatalf("server saw %d attempts, want %d", s.count(), n)
	}
}
