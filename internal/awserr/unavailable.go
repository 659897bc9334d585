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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Unavailable reports whether err, returned by an SDK call after the SDK's
// own retries, means the service could not be used: the call was
// throttled, got a 5xx, could not connect or lost its connection, ran
// out of its context's deadline, met a transaction holding its item
// (see passingTransactionError), or met a write of its item in another
// Region (ReplicatedWriteConflictException: an MRSC table refuses the
// later of two writes of one item made at once in two Regions; the SDK
// does not retry it, a client fault, and nothing was written, so it is
// tried again later like any outage, never read as a failed condition;
// RED_TEAM 453). A failed condition, a transaction
// cancelled for another reason, a validation error or a cancelled context
// is not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if passingTransactionError(err) {
		return true
	}
	var rwc *types.ReplicatedWriteConflictException
	if errors.As(err, &rwc) {
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

// passingTransactionError reports whether err says a write did not apply
// for a reason that passes: TransactionConflictException (a single-item
// write met a transaction under way on its item), or a
// TransactionCanceledException whose every reason is None or one of
// throttling, capacity or a conflicting transaction. The SDK does not
// retry either (HTTP 400), and nothing was written, so the call may be
// tried again later. A cancellation with a failed condition, or any other
// reason, is the caller's to read.
func passingTransactionError(err error) bool {
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		return true
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	passing := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "None", "":
		case "ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict", "RequestLimitExceeded":
			passing = true
		default:
			return false
		}
	}
	return passing
}
