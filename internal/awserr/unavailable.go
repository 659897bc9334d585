// Package awserr classifies the errors of AWS SDK calls for the stores and
// the host, so that every DynamoDB caller draws the same line between "the
// service could not be used" (retry later) and every other error.
package awserr

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Unavailable reports whether err, returned by an SDK call after the SDK's
// own retries, means the service could not be used: the call was
// throttled, got a 5xx, could not connect or lost its connection, or ran
// out of its context's deadline. A failed condition, a cancelled
// transaction, a validation error or a cancelled context is not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if _, ok := retry.DefaultThrottleErrorCodes[ae.ErrorCode()]; ok {
			return true
		}
		switch ae.ErrorCode() {
		case "InternalServerError", "ServiceUnavailable", "RequestTimeout", "RequestTimeoutException":
			return true
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		// 0: no response at all.
		if code := re.HTTPStatusCode(); code == 0 || code >= 500 {
			return true
		}
		return false
	}
	if ae != nil {
		return ae.ErrorFault() == smithy.FaultServer
	}
	return retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary
}
