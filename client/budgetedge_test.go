package client

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A response whose headers arrived is delivered even when MaxElapsed runs
// out before the Transport hands it over: the server answered (here a
// final 201), so the caller must see that answer, not an error saying the
// call failed. The clock is read once after the answer arrives (for its
// Retry-After); here that read takes longer than the whole budget, so the
// budget's real timer fires between the headers and the delivery. The
// budget is a second, so that the request and its answer arrive inside it
// however loaded the machine is (with 50 ms a slow round trip ran it out
// before the answer, and the call failed as it should).
func TestResponseArrivedAsBudgetRanOutIsDelivered(t *testing.T) {
	var answered atomic.Bool
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		answered.Store(true)
		status(201)(w, r)
	})
	now := func() time.Time {
		if answered.CompareAndSwap(true, false) {
			time.Sleep(1200 * time.Millisecond) // past MaxElapsed
		}
		return time.Now()
	}
	c := mustNew(t, Config{MaxElapsed: time.Second, Now: now})
	resp, body, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatalf("the server answered 201, the caller got: %v", err)
	}
	if resp.StatusCode != 201 || body != `{"status":201}` || resp.Attempts != 1 || s.count() != 1 {
		t.Fatalf("status %d body %q attempts %d (server %d)", resp.StatusCode, body, resp.Attempts, s.count())
	}
}

// A base RoundTripper that returns its answer after MaxElapsed ran out (it
// did not stop at the cancellation) hands over an answer that arrived: it
// is delivered. The budget is a second, so that the call reaches the base
// inside it however loaded the machine is.
func TestResponseReturnedAfterBudgetIsDelivered(t *testing.T) {
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		time.Sleep(1200 * time.Millisecond) // past MaxElapsed, not watching r's context
		return &http.Response{StatusCode: 201, Header: http.Header{}, Request: r,
			Body: io.NopCloser(strings.NewReader(`{"ok":true}`))}, nil
	})
	c := mustNew(t, Config{Base: base, MaxElapsed: time.Second})
	resp, body, err := post(t, c, "http://api.invalid/orders", `{}`)
	if err != nil {
		t.Fatalf("the base answered 201, the caller got: %v", err)
	}
	if resp.StatusCode != 201 || body != `{"ok":true}` || resp.Attempts != 1 {
		t.Fatalf("status %d body %q attempts %d", resp.StatusCode, body, resp.Attempts)
	}
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The body the Transport reads to find a 409's error code is read within
// the budget: a 409 whose body hangs past MaxElapsed never arrived whole,
// and the call ends with ErrBudgetExhausted instead of hanging.
func TestConflictBodyHungPastBudgetEndsCall(t *testing.T) {
	release := make(chan struct{})
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	c := mustNew(t, Config{MaxElapsed: 100 * time.Millisecond})
	start := time.Now()
	_, _, err := post(t, c, s.srv.URL, `{}`)
	if !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("err %v, want ErrBudgetExhausted", err)
	}
	if el := time.Since(start); el > 2*time.Minute { // a hang guard, not a speed limit
		t.Fatalf("call took %v", el)
	}
}
