package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A call whose attempts all failed before an answer, and which stopped
// because the next wait would end past MaxElapsed or the context's
// deadline, says so: its error matches ErrBudgetExhausted or
// context.DeadlineExceeded, so a caller can tell it from one that used up
// MaxAttempts, and knows to send the call again later with the same key.
func TestGivingUpOnTheBudgetSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxElapsed time.Duration
		ctxTimeout time.Duration
		want, not  error
	}{
		{"MaxElapsed", 10 * time.Minute, 0, ErrBudgetExhausted, context.DeadlineExceeded},
		{"context deadline", time.Hour, 10 * time.Minute, context.DeadlineExceeded, ErrBudgetExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t, drop)
			clk := &fakeClock{t: time.Now()}
			c := mustNew(t, Config{MaxAttempts: 1000, MaxElapsed: tc.maxElapsed, BaseDelay: 4 * time.Minute,
				MaxDelay: 4 * time.Minute, Now: clk.Now, Sleep: clk.Sleep})
			ctx := context.Background()
			if tc.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
				defer cancel()
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader(`{}`))
			_, err := c.Do(req)
			var ce *Error
			if !errors.As(err, &ce) || ce.Attempts < 2 || ce.Attempts > 5 || s.count() != ce.Attempts {
				t.Fatalf("err %v (server saw %d)", err, s.count())
			}
			if !errors.Is(err, tc.want) || errors.Is(err, tc.not) {
				t.Fatalf("err %v: want it to match %v and not %v", err, tc.want, tc.not)
			}
			if strings.Contains(err.Error(), ce.Key) {
				t.Fatalf("err %v carries the key", err)
			}
			sameKeys(t, s, ce.Key)
		})
	}
	// MaxAttempts used up: neither.
	s := newScripted(t, drop)
	var w waits
	cfg := fastConfig(&w)
	cfg.MaxAttempts = 2
	c := mustNew(t, cfg)
	_, _, err := post(t, c, s.srv.URL, `{}`)
	if err == nil || errors.Is(err, ErrBudgetExhausted) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("MaxAttempts: err %v", err)
	}
}
