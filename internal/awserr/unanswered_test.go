package awserr

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// TestTriesThroughTheTransport: the SDK hands a try that got no HTTP answer
// to its retryer as a response error of status 0 wrapping the transport's
// error, not the bare error the fault injector returns (RED_TEAM 373). A
// request sent whose connection then closed or hung until the call's
// deadline may have been applied; a connection never made, or a TLS
// handshake that failed (nothing sent), was not.
func TestTriesThroughTheTransport(t *testing.T) {
	listen := func(t *testing.T, serve func(net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		t.Cleanup(func() { close(done); ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					serve(c)
					<-done
				}()
			}
		}()
		return ln.Addr().String()
	}
	readRequest := func(c net.Conn) {
		if r, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
	}
	closed := listen(t, func(c net.Conn) { readRequest(c); c.Close() })
	hung := listen(t, readRequest)
	plain := listen(t, func(c net.Conn) {
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
	})
	// A TLS-terminating proxy dropping the connection during the
	// handshake: the ClientHello read, then a reset.
	resetInHandshake := listen(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 1024))
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	})
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	defer tlsSrv.Close()
	for _, c := range []struct {
		name, endpoint string
		want           bool
	}{
		{"request read, then the connection closed", "http://" + closed, true},
		{"request read, no answer before the deadline", "http://" + hung, true},
		{"TLS to a server speaking plain HTTP", "https://" + plain, false},
		{"TLS, a certificate not trusted", tlsSrv.URL, false},
		{"connection refused", "http://127.0.0.1:1", false},
		{"reset during the TLS handshake", "https://" + resetInHandshake, false},
	} {
		var tr Tries
		cl := dynamodb.New(dynamodb.Options{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}, BaseEndpoint: aws.String(c.endpoint),
			Retryer: retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 1 })}, tr.Option)
		// Only the hung listener reaches the deadline; the others end on
		// their own, long before it even under load.
		wait := time.Minute
		if c.endpoint == "http://"+hung {
			wait = time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		_, err := cl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"),
			Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}})
		cancel()
		if err == nil {
			t.Fatalf("%s: the call succeeded", c.name)
		}
		if tr.Lost() != c.want {
			t.Errorf("%s: Lost %v, want %v (%v)", c.name, tr.Lost(), c.want, err)
		}
	}
}
