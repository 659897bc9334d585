package devstack

import (
	"context"
	"errors"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"
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
