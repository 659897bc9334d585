package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client is an http.Client whose Transport is a *Transport, with a Do that
// returns the Result alongside the response.
type Client struct {
	hc *http.Client
}

// Response is an *http.Response with the Result of the call that produced it.
type Response struct {
	*http.Response
	Result
}

// New validates cfg and returns a Client using a Transport with it. The
// underlying http.Client has no Timeout of its own: Config.MaxElapsed and the
// request context bound each call.
func New(cfg Config) (*Client, error) {
	t, err := NewTransport(cfg)
	if err != nil {
		return nil, err
	}
	keyHeader := t.Config.withDefaults().KeyHeader
	return &Client{hc: &http.Client{Transport: t, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		return checkRedirect(req, via, keyHeader)
	}}}, nil
}

// maxRedirects is http.Client's own limit on the hops of one call.
const maxRedirects = 10

// checkRedirect keeps a mutating call's key at the origin it was sent to. A
// hop to another origin (scheme, host and port) that re-sends the call (a
// 307 or 308) is not followed: the other origin keeps records of its own,
// so its run could not be the call's one, and it would learn the key; the
// redirect is returned to the caller. Another hop to another origin (a
// 301, 302 or 303 that makes it a GET) is followed without the key or the
// caller's credential headers (Authorization, Cookie). A move
// of the same host from http to https on the default ports is followed.
func checkRedirect(req *http.Request, via []*http.Request, keyHeader string) error {
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0]
	if !Mutating(first.Method) || sameOrigin(first.URL, req.URL) || upgrade(first.URL, req.URL) {
		return nil
	}
	if Mutating(req.Method) {
		return http.ErrUseLastResponse
	}
	// net/http copies the first request's header map to the hop as it is
	// spelled: every spelling goes (RED_TEAM 480).
	delHeader(req.Header, keyHeader)
	for _, h := range credentialHeaders {
		delHeader(req.Header, h)
	}
	return nil
}

// credentialHeaders are the headers net/http keeps from a redirect to
// another host name only; a mutating call's hop to another origin (another
// port or scheme of the same host too) goes without them.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Www-Authenticate", "Cookie", "Cookie2"}

// sameOrigin reports whether a and b have one origin (RFC 6454): scheme,
// host and port, a missing port being the scheme's default.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && originPort(a) == originPort(b)
}

// upgrade reports whether b is a's host moved from http to https on the
// default ports: the same service reached securely, not another origin to
// keep the key from (it went to that host already).
func upgrade(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, "http") && strings.EqualFold(b.Scheme, "https") &&
		strings.EqualFold(a.Hostname(), b.Hostname()) && originPort(a) == "80" && originPort(b) == "443"
}

func originPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// HTTPClient returns the underlying *http.Client, for code that wants a
// plain http.Client (its Result is available through WithResult).
func (c *Client) HTTPClient() *http.Client { return c.hc }

// Do sends req like http.Client.Do and returns the response with its Result.
// The hops of a redirected call are one logical call: a 307/308 re-sends the
// same key and body, the hops share Config.MaxAttempts and Config.MaxElapsed,
// and the Result counts the attempts of every hop. A 307/308 of a mutating
// call to another origin (scheme, host or port; a move of the same host
// from http to https on the default ports aside) is not followed: it is
// returned as the response, so the key and body go to no origin but the
// one the call was sent to; a 301, 302 or 303 to another origin is
// followed as a GET without the key or the caller's Authorization and
// Cookie headers.
// To send a key derived from a business event, set the Idempotency-Key header
// on req or build req with a context from WithKey. On error, errors.As(err,
// new(*client.Error)) gives the key and the number of attempts. A mutating
// request's body without GetBody (a plain io.Reader) is read into memory
// first, so that a 307/308 hop can re-send it too.
func (c *Client) Do(req *http.Request) (*Response, error) {
	var r Result
	ctx := context.WithValue(WithResult(req.Context(), &r), callCtx{}, &callState{})
	hreq := req.WithContext(ctx)
	if Mutating(req.Method) && req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		bufferBody(hreq)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	return &Response{Response: resp, Result: r}, nil
}

// bufferBody reads req's body into memory and gives req a GetBody, which
// http.Client needs to follow a 307/308. A read error is kept in the body, so
// that the Transport fails the call with it (with the key) before sending.
func bufferBody(req *http.Request) {
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
		return
	}
	req.ContentLength = int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) {
		if len(b) == 0 {
			return http.NoBody, nil
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	req.Body, _ = req.GetBody()
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
