package client

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A request built by hand without a Header map, handed to the Transport's
// RoundTrip directly (http.Client would have given it one), is sent like
// any other: with the call's key, retried with it. It panicked: the
// Transport set the key on each attempt's copy of the nil map.
func TestRoundTripWithoutAHeaderMap(t *testing.T) {
	s := newScripted(t, status(503), status(201))
	var w waits
	tr, err := NewTransport(fastConfig(&w))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(s.srv.URL)
	var res Result
	req := (&http.Request{Method: http.MethodPost, URL: u, Body: io.NopCloser(strings.NewReader(`{"a":1}`)), ContentLength: 7}).
		WithContext(WithResult(t.Context(), &res))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || res.Attempts != 2 || !uuidV4.MatchString(res.Key) || req.Header != nil {
		t.Fatalf("status %d result %+v; caller's header %v", resp.StatusCode, res, req.Header)
	}
	sameKeys(t, s, res.Key)
	sameBodies(t, s, `{"a":1}`)
}
