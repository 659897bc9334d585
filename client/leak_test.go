package client

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Calls cancelled in the middle of a backoff (the real timer, not an
// injected Sleep) end at once with the context's error, in a *Error
// carrying the key, and leave no goroutine behind: the budget timer, the
// wait's timer and the attempts' contexts are all released. One Client is
// shared by every call.
func TestCancelledMidBackoffLeavesNothingRunning(t *testing.T) {
	s := newScripted(t, status(503, "Retry-After", "3600"))
	c := mustNew(t, Config{MaxElapsed: 2 * time.Hour, Base: &http.Transport{}})
	defer c.HTTPClient().Transport.(*Transport).Config.Base.(*http.Transport).CloseIdleConnections()
	before := runtime.NumGoroutine()
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader(`{"a":1}`))
			time.AfterFunc(200*time.Millisecond, cancel)
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
	deadline := time.Now().Add(10 * time.Second)
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
