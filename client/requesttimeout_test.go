package client

import (
	"testing"
)

// TestRequestTimeoutIsRetried: a "408 Request Timeout" says the server did
// not receive the whole request in the time it was prepared to wait and
// invites the client to repeat it (RFC 9110 §15.5.9); idemkit's Layer 1
// records no 408 under the OpenWOP default and the ERP policy, so the
// retry runs the request. It is retried under the same key, as a 429 is,
// no sooner than its Retry-After; a 408 carrying a replay marker is the
// server's recorded outcome for the key (the commerce policy replays a
// failed action as failed) and is final.
func TestRequestTimeoutIsRetried(t *testing.T) {
	s := newScripted(t, envelope(408, "timeout", "Retry-After", "1"), status(201))
	var w waits
	c := mustNew(t, fastConfig(&w))
	resp, _, err := post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Attempts != 2 || s.count() != 2 {
		t.Fatalf("a 408 then a 201: status %d attempts %d server %d", resp.StatusCode, resp.Attempts, s.count())
	}
	if got := w.all(); len(got) != 1 || got[0] < 1e9 {
		t.Fatalf("waits %v, want one of at least Retry-After's 1 s", got)
	}
	sameKeys(t, s, resp.Key)

	s = newScripted(t, envelope(408, "timeout", "Idempotent-Replayed", "true"), status(201))
	c = mustNew(t, fastConfig(&w))
	resp, _, err = post(t, c, s.srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 408 || resp.Attempts != 1 || s.count() != 1 {
		t.Fatalf("a replayed 408: status %d attempts %d server %d", resp.StatusCode, resp.Attempts, s.count())
	}
}
