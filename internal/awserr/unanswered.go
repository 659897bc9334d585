package awserr

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http/httptrace"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Unanswered reports whether a try of a call that failed with err may
// have been applied: it was sent and no answer says it was not. A
// refusal the engine answered with a 4xx (a throttle, a failed
// condition) was not applied, nor was a try whose connection was never
// made, whose TLS handshake failed, or whose request the transport never
// wrote (a reset during the handshake, seen by Tries and MarkUnanswered),
// nor one a server that is no DynamoDB engine answered (a web
// server's 500 page); a connection lost or reset after the request went
// out, no answer in time, or a DynamoDB 5xx (or a gateway's 502, 503,
// 504 in front of one) may have been.
func Unanswered(err error) bool {
	if err == nil {
		return false
	}
	if errors.As(err, new(*notSentError)) {
		return false
	}
	var re *smithyhttp.ResponseError
	// The SDK wraps a try whose request could not be sent, or whose answer
	// never came, in a response error too, of status 0 (no response):
	// judged below by what failed.
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		code := re.HTTPStatusCode()
		if code < 500 {
			return false
		}
		var de *smithy.DeserializationError
		var ae smithy.APIError
		notDynamo := errors.As(err, &de) || errors.As(err, &ae) && ae.ErrorCode() == "UnknownError"
		return !notDynamo || code == 502 || code == 503 || code == 504
	}
	var ae smithy.APIError
	if errors.As(err, &ae) { // a refusal with no HTTP status: not from the wire
		switch ae.ErrorCode() {
		case "InternalServerError", "ServiceUnavailable":
			return true
		}
		return false
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return false
	}
	if handshakeFailed(err) {
		return false
	}
	return true
}

// handshakeFailed reports whether err is a TLS handshake's failure, which
// comes before the request is written: a certificate not trusted, a server
// that does not speak TLS.
func handshakeFailed(err error) bool {
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var ae tls.AlertError
	return errors.As(err, &rh) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) ||
		errors.As(err, &ci) || errors.As(err, &ae) ||
		// net/http's own words for a plain-HTTP answer to its handshake
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// Tries records whether any try of the calls it is installed on (its
// Option, per call or per client) got no answer and may have been
// applied (Unanswered). It reads the SDK's own record of the tries
// (retry.AttemptResults), just outside the SDK's retry middleware: it
// costs no round trip. A client without that middleware records nothing.
// Not safe for concurrent calls.
type Tries struct{ lost bool }

// Lost reports whether a try got no answer.
func (t *Tries) Lost() bool { return t.lost }

// Option is the client option that installs the recorder.
func (t *Tries) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		if err := addNotSent(s); err != nil {
			return err
		}
		return addOutsideRetry(s, "idemkit.Tries", func(md middleware.Metadata, err error) error {
			t.lost = t.lost || unansweredTry(md)
			return err
		})
	})
}

// UnansweredError is the error of a call one of whose tries got no answer
// and may have been applied (Unanswered): its text is the call's error's,
// which it wraps.
type UnansweredError struct{ Err error }

func (e *UnansweredError) Error() string { return e.Err.Error() }
func (e *UnansweredError) Unwrap() error { return e.Err }

// MarkUnanswered is a client option: the error of a call one of whose
// tries got no answer (Unanswered) is an *UnansweredError, so a command
// can say its write may have been applied. A call that succeeds is
// untouched, and no round trip is added; installed twice, it runs once.
func MarkUnanswered(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		if _, ok := s.Finalize.Get(markID); ok {
			return nil
		}
		if err := addNotSent(s); err != nil {
			return err
		}
		return addOutsideRetry(s, markID, func(md middleware.Metadata, err error) error {
			if err != nil && unansweredTry(md) {
				return &UnansweredError{err}
			}
			return err
		})
	})
}

// markID names the middleware MarkUnanswered installs.
const markID = "idemkit.MarkUnanswered"

// unansweredTry reports whether the SDK's record of a call's tries, in md,
// holds one that got no answer.
func unansweredTry(md middleware.Metadata) bool {
	res, ok := retry.GetAttemptResults(md)
	if !ok {
		return false
	}
	for _, r := range res.Results {
		if Unanswered(r.Err) {
			return true
		}
	}
	return false
}

// notSentError is the error of a try whose request the transport never
// wrote (httptrace's WroteRequest did not fire): a connection reset during
// its TLS handshake, say. It was not applied (RED_TEAM 375).
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// notSentID names the per-try middleware addNotSent installs.
const notSentID = "idemkit.NotSent"

// addNotSent adds, inside the SDK's retry loop (once per stack), a
// middleware that traces each try's HTTP request and marks the error of a
// try that got no HTTP answer and whose request was never written
// (notSentError). A stack without the retry middleware is left alone.
func addNotSent(s *middleware.Stack) error {
	if _, ok := s.Finalize.Get(notSentID); ok {
		return nil
	}
	if _, ok := s.Finalize.Get("Retry"); !ok {
		return nil
	}
	return s.Finalize.Insert(middleware.FinalizeMiddlewareFunc(notSentID,
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			var wrote atomic.Bool
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) }})
			out, md, err := next.HandleFinalize(ctx, in)
			var re *smithyhttp.ResponseError
			if err != nil && !wrote.Load() && errors.As(err, &re) && re.HTTPStatusCode() == 0 {
				err = &notSentError{err}
			}
			return out, md, err
		}), "Retry", middleware.After)
}

// addOutsideRetry adds a Finalize middleware named id just before the SDK's
// retry middleware (at the step's start without one) that passes the
// call's metadata and error to after, and returns its error.
func addOutsideRetry(s *middleware.Stack, id string, after func(md middleware.Metadata, err error) error) error {
	mw := middleware.FinalizeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			return out, md, after(md, err)
		})
	if _, ok := s.Finalize.Get("Retry"); ok {
		return s.Finalize.Insert(mw, "Retry", middleware.Before)
	}
	return s.Finalize.Add(mw, middleware.Before)
}
