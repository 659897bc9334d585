package emulator

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// Region is the region clients of an emulator sign for unless told
// otherwise.
const Region = "us-east-1"

// Credentials are the static credentials used with emulators.
var Credentials = credentials.NewStaticCredentialsProvider("idemkit", "idemkit", "")

// Client returns a DynamoDB client for endpoint: static Credentials, Region,
// the SDK's standard retryer, and response checksum validation off (see
// below). optFns run last and can override anything.
//
// DynamoDB Local answers every error response (a failed conditional write:
// every duplicate claim, so every replay) with an X-Amz-Crc32 header of 0,
// which matches no body. The SDK's CRC32 validation then fails when it
// closes the body and logs "failed to close HTTP response body ...:
// response did not match expected checksum" at WARN on each one; the
// response itself was read intact. The checksum guards against corruption
// on the wire to DynamoDB, not on a loopback connection to an engine of
// this machine, so local clients switch it off
// (Options.DisableValidateResponseChecksum).
func Client(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: Region, BaseEndpoint: aws.String(endpoint), Credentials: Credentials,
		DisableValidateResponseChecksum: true}, optFns...)
}

// StreamsClient returns a DynamoDB Streams client for endpoint, configured
// like Client.
func StreamsClient(endpoint string, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{Region: Region, BaseEndpoint: aws.String(endpoint), Credentials: Credentials}, optFns...)
}

// WaitReady polls c with ListTables (one attempt each, at most 2 s) every
// 50 ms until it answers, ctx ends, or exited closes (proc.ErrExited; nil
// never closes).
func WaitReady(ctx context.Context, c *dynamodb.Client, exited <-chan struct{}) error {
	return proc.Poll(ctx, 50*time.Millisecond, exited, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
}
