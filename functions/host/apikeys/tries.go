package apikeys

import (
	"context"
	"errors"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrAnswerLost is joined to the error of a Revoke one of whose tries of
// the delete was sent and got no answer (its connection lost, no answer
// in time, or a 5xx), and which the SDK sent again: that try may have
// deleted the key. With ErrKeyNotFound the key is gone: that try deleted
// it, or it was gone before. With any other error the delete's outcome is
// unknown.
var ErrAnswerLost = errors.New("host: a try of the delete was sent and got no answer; it may have deleted the key")

// lostTries records whether a call's SDK retry loop sent again a try that
// may have been applied though its answer never came (unanswered). It
// reads the SDK's own record of the tries (retry.AttemptResults), so it
// costs no round trip; a client without the SDK's retry middleware
// records nothing.
type lostTries struct{ lost bool }

// option is the per-call client option that installs the recorder just
// outside the SDK's retry middleware.
func (l *lostTries) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		mw := middleware.FinalizeMiddlewareFunc("apikeys.lostTries",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleFinalize(ctx, in)
				if res, ok := retry.GetAttemptResults(md); ok {
					for _, r := range res.Results {
						if r.Retried && unanswered(r.Err) {
							l.lost = true
						}
					}
				}
				return out, md, err
			})
		if _, ok := s.Finalize.Get("Retry"); ok {
			return s.Finalize.Insert(mw, "Retry", middleware.Before)
		}
		return s.Finalize.Add(mw, middleware.Before)
	})
}

// unanswered reports whether a try that failed with err may have been
// applied: it was sent and no answer says it was not. An engine's
// refusal of it with a 4xx (a throttle) was not applied, nor was a try
// whose connection was never made; a 5xx, a connection lost or reset, a
// timeout may have been.
func unanswered(err error) bool {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode() >= 500
	}
	var ae smithy.APIError
	if errors.As(err, &ae) { // a refusal with no HTTP status (not from the wire)
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
	return err != nil
}

// lostError is err with ErrAnswerLost joined, said in err's words alone
// (a command renders err as it did).
type lostError struct{ err error }

func (e lostError) Error() string   { return e.err.Error() }
func (e lostError) Unwrap() []error { return []error{e.err, ErrAnswerLost} }
