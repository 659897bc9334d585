package devstack

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/idemkit/idemkit/idem"
)

// TestStoreUnavailable: a call that got no answer (refused, reset,
// deadline) or a 5xx means the store is unavailable; an answer such as a
// failed condition (400) or the request's cancellation does not.
func TestStoreUnavailable(t *testing.T) {
	respErr := func(status int) error {
		var resp *smithyhttp.Response
		if status > 0 {
			resp = &smithyhttp.Response{Response: &http.Response{StatusCode: status}}
		} else {
			resp = &smithyhttp.Response{Response: &http.Response{}}
		}
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: resp, Err: errors.New("x")}}
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{respErr(400), false},
		{respErr(0), true},
		{respErr(500), true},
		{respErr(503), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false}, // the client hung up
		{errors.New("dial tcp: connection refused"), true},
	} {
		if got := storeUnavailable(c.err); got != c.want {
			t.Errorf("storeUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestStoreUnavailableMessageNamesTheKeyOnlyWhenSent: the dev gateway's
// 503 tells a request to retry with the same Idempotency-Key only when it
// carried one on a route that runs under it; a GET, or a write without a
// key, is told to retry after the delay.
func TestStoreUnavailableMessageNamesTheKeyOnlyWhenSent(t *testing.T) {
	for _, c := range []struct {
		method, path, key string
		keyed             bool
	}{
		{"GET", "/runs/acme~2Fabcdefghijklmnopqr", "", false},
		{"GET", "/runs/acme~2Fabcdefghijklmnopqr", "k-0123456789abcdefghijkl", false},
		{"POST", "/runs", "", false},
		{"POST", "/runs", " ", false},
		{"POST", "/runs", "k-0123456789abcdefghijkl", true},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.key != "" {
			r.Header.Set(idem.HeaderKey, c.key)
		}
		e := storeUnavailableErr(keyedRequest(r))
		if e.Status != 503 || e.Code != CodeStoreUnavailable || strings.Contains(e.Message, "Idempotency-Key") != c.keyed {
			t.Errorf("%s %s key %q: %v", c.method, c.path, c.key, e)
		}
	}
}
