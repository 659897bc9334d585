package awserr

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TestUnanswered: a try may have been applied when it was sent and no
// answer says it was not (RED_TEAM 364): a lost or reset connection, no
// answer in time, a DynamoDB 5xx or a gateway's 502 to 504; not a 4xx
// refusal, a connection never made, or a web server's own 500 page.
func TestUnanswered(t *testing.T) {
	status := func(code int, err error) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: err}}
	}
	sendFailed := func(err error) error {
		return status(0, &smithyhttp.RequestSendError{Err: &url.Error{Op: "Post", URL: "http://127.0.0.1:8000/", Err: err}})
	}
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"throttled 400", status(400, api("ProvisionedThroughputExceededException")), false},
		{"condition 400", status(400, api("ConditionalCheckFailedException")), false},
		{"DynamoDB 500", status(500, api("InternalServerError")), true},
		{"DynamoDB 503", status(503, api("ServiceUnavailable")), true},
		{"a web server's 500 page", status(500, api("UnknownError")), false},
		{"a gateway's 504 page", status(504, &smithy.DeserializationError{Err: errors.New("html")}), true},
		{"throttled, no status", api("ProvisionedThroughputExceededException"), false},
		{"500, no status", api("InternalServerError"), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true},
		{"deadline", context.DeadlineExceeded, true},
		// As the SDK returns them: a try that got no response is a
		// response error of status 0 around the send failure.
		{"sent, connection closed unanswered", sendFailed(io.EOF), true},
		{"sent, connection reset", sendFailed(&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}), true},
		{"sent, no answer in time", sendFailed(errors.New("net/http: timeout awaiting response headers")), true},
		{"connection refused, as sent", sendFailed(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), false},
	} {
		if got := Unanswered(c.err); got != c.want {
			t.Errorf("%s: Unanswered %v, want %v", c.name, got, c.want)
		}
	}
}
