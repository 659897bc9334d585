package emulator

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go"
)

// HasStreams reports whether endpoint serves the DynamoDB Streams API: false
// only when it answers ListStreams with UnknownOperationException, as
// dynalite does; true for any other answer, a failure to reach it included
// (a DynamoDB endpoint is assumed to have streams unless it says it does
// not). Bounded by 10 s.
func HasStreams(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := StreamsClient(endpoint).ListStreams(ctx, &dynamodbstreams.ListStreamsInput{Limit: aws.Int32(1)})
	var ae smithy.APIError
	return !errors.As(err, &ae) || ae.ErrorCode() != "UnknownOperationException"
}
