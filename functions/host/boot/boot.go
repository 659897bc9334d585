// Package boot is the ground the functions' start-up stands on: the JSON
// logger on stderr, Must, the process environment (Getenv), the DynamoDB
// client from the default AWS configuration, and the init trace (Trace). It
// depends on no other host package, so a function that needs only a client
// and a table name links none of the protocol packages (idem, ledger) nor
// the settings table. It has two users: kit, the start-up every other main
// goes through (kit.Boot, kit.Begin), and the authorizer, which starts from
// boot alone for its cold start. With kit it is one of the two packages of
// the host that read the process environment.
package boot

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/awserr"
)

// Must ends the process with a logged error when err is not nil (name: the
// function, stage: what failed), which Lambda reports as an init error.
func Must(logger *slog.Logger, name, stage string, err error) {
	if err != nil {
		logger.Error(name+": "+stage, slog.String("error", err.Error()))
		os.Exit(1)
	}
}

// Getenv reads the process environment. The start-up is the one place the
// functions read it (internal/archtest holds them to that); everything else
// is given a getenv or a settings.Env.
func Getenv(name string) string { return os.Getenv(name) }

// DynamoClient returns a DynamoDB client from the default AWS configuration
// (the Lambda role's credentials and region from the environment, shared
// config files, the full default credential chain), with endpoint as
// BaseEndpoint when set (DYNAMODB_ENDPOINT, e.g. LocalStack). Loading the
// configuration reads no network: credentials are resolved at the first
// call that signs a request. With an endpoint the SDK's response checksum
// validation is off: DynamoDB Local sends a wrong CRC32 header with every
// error response (every replay), and the SDK would log a checksum warning
// for each; the check guards the wire to AWS. Its retryer is the one the
// client resolves, which also retries TransactionConflictException. opts
// are applied to the configuration's loading (the CLI's quiet logger).
func DynamoClient(ctx context.Context, endpoint string, opts ...func(*config.LoadOptions) error) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("host: AWS config: %w", err)
	}
	Trace("aws-config")
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.DisableValidateResponseChecksum = true
		}
	})
	// A single-item write refused because a transaction holds its item
	// (TransactionConflictException) did not apply: retried like a
	// throttle, which the client's retryer (DynamoDB's defaults, or
	// AWS_RETRY_MODE and AWS_MAX_ATTEMPTS) does not do for it. The
	// resolved retryer is wrapped, never replaced.
	//
	// A call's error never quotes what the call sent (awserr.RedactValues):
	// a service's message may quote the item or value it refused, and
	// every function logs its stores' errors.
	c = dynamodb.New(c.Options(), func(o *dynamodb.Options) {
		o.Retryer = retry.AddWithErrorCodes(o.Retryer, (&types.TransactionConflictException{}).ErrorCode())
	}, awserr.RedactValues)
	Trace("sdk-client")
	return c, nil
}
