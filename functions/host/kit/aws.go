package kit

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/boot"
)

// NewDynamoClient returns a DynamoDB client from the default AWS
// configuration (the Lambda role), with endpoint as BaseEndpoint when set
// (DYNAMODB_ENDPOINT, e.g. LocalStack). It is boot's client (see
// boot.DynamoClient for the checksum and endpoint details), the one every
// main but the authorizer's and the CLI reach it by. opts are applied to
// the configuration's loading.
func NewDynamoClient(ctx context.Context, endpoint string, opts ...func(*config.LoadOptions) error) (*dynamodb.Client, error) {
	return boot.DynamoClient(ctx, endpoint, opts...)
}
