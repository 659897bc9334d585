package client

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Config's fields do what their comments say: MaxAttempts 1 sends the key
// and makes no retry, yet still polls an in-flight answer with
// Retry-After; KeyHeader names the header that carries the key (a caller's
// key in it included); ReplayHeaders and InFlightCodes replace the
// defaults.
func TestConfigFieldsDoWhatTheySay(t *testing.T) {
	t.Run("MaxAttempts 1", func(t *testing.T) {
		s := newScripted(t, status(503))
		var w waits
		cfg := fastConfig(&w)
		cfg.MaxAttempts = 1
		resp, _, err := post(t, mustNew(t, cfg), s.srv.URL, `{}`)
		if err != nil || resp.StatusCode != 503 || resp.Attempts != 1 || s.count() != 1 || len(w.all()) != 0 || !uuidV4.MatchString(resp.Key) {
			t.Fatalf("err %v resp %+v server %d waits %v", err, resp, s.count(), w.all())
		}
		sameKeys(t, s, resp.Key)

		s = newScripted(t, envelope(409, "idempotency_in_flight", "Retry-After", "1"),
			envelope(409, "idempotency_in_flight", "Retry-After", "1"), status(201, "OpenWOP-Idempotent-Replay", "true"))
		resp, _, err = post(t, mustNew(t, cfg), s.srv.URL, `{}`)
		if err != nil || resp.StatusCode != 201 || resp.Attempts != 3 || !resp.Replayed {
			t.Fatalf("in-flight polls under MaxAttempts 1: err %v resp %+v", err, resp)
		}
		sameKeys(t, s, resp.Key)
	})
	t.Run("KeyHeader", func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, strings.Join(r.Header.Values("X-Request-Key"), ",")+"|"+r.Header.Get("Idempotency-Key"))
			mu.Unlock()
			status(201)(w, r)
		})
		var w waits
		cfg := fastConfig(&w)
		cfg.KeyHeader = "X-Request-Key"
		c := mustNew(t, cfg)
		resp, _, err := post(t, c, s.srv.URL, `{}`)
		if err != nil || len(got) != 1 || got[0] != resp.Key+"|" {
			t.Fatalf("err %v sent %q, want the minted key %q in X-Request-Key only", err, got, resp.Key)
		}
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL, strings.NewReader(`{}`))
		req.Header.Set("X-Request-Key", "caller-key-0123456789abcdefgh")
		r2, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if r2.Key != "caller-key-0123456789abcdefgh" || got[1] != "caller-key-0123456789abcdefgh|" {
			t.Fatalf("caller's key: result %q, sent %q", r2.Key, got)
		}
	})
	t.Run("ReplayHeaders and InFlightCodes", func(t *testing.T) {
		s := newScripted(t, envelope(409, "busy", "Retry-After", "0"), envelope(409, "idempotency_in_flight"),
			status(201, "X-Cached", "TRUE", "OpenWOP-Idempotent-Replay", "true"))
		var w waits
		cfg := fastConfig(&w)
		cfg.InFlightCodes = []string{"busy"}
		cfg.ReplayHeaders = []string{"X-Cached"}
		cfg.MaxElapsed = time.Minute
		c := mustNew(t, cfg)
		resp, _, err := post(t, c, s.srv.URL, `{}`)
		// "busy" is polled; the default code is no longer in flight: final.
		if err != nil || resp.StatusCode != 409 || resp.Attempts != 2 {
			t.Fatalf("err %v resp %+v", err, resp)
		}
		s = newScripted(t, status(201, "X-Cached", "TRUE"))
		resp, _, err = post(t, c, s.srv.URL, `{}`)
		if err != nil || !resp.Replayed {
			t.Fatalf("X-Cached: TRUE not a replay: err %v resp %+v", err, resp)
		}
		s = newScripted(t, status(201, "OpenWOP-Idempotent-Replay", "true"))
		resp, _, err = post(t, c, s.srv.URL, `{}`)
		if err != nil || resp.Replayed {
			t.Fatalf("a default marker counted though ReplayHeaders replaced them: err %v resp %+v", err, resp)
		}
	})
	// An empty, non-nil list replaces the defaults with none, as an empty
	// InFlightCodes does: before, the Transport's check fell back to the
	// defaults for an empty list, so a 503 marked with one of them was
	// final and a 201 so marked a replay (RED_TEAM 483).
	t.Run("no ReplayHeaders", func(t *testing.T) {
		s := newScripted(t, status(503, "OpenWOP-Idempotent-Replay", "true"), status(201, "Idempotent-Replayed", "true"))
		var w waits
		cfg := fastConfig(&w)
		cfg.ReplayHeaders = []string{}
		c := mustNew(t, cfg)
		resp, _, err := post(t, c, s.srv.URL, `{}`)
		if err != nil || resp.StatusCode != 201 || resp.Attempts != 2 || resp.Replayed {
			t.Fatalf("err %v resp %+v; want the 503 retried and the 201 not a replay", err, resp)
		}
	})
}
