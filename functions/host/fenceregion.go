package host

import (
	"regexp"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// regionRE is the shape of an AWS region name (eu-west-1, us-gov-west-1,
// ap-southeast-4, cn-north-1).
var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// ValidRegion reports whether s looks like an AWS region name.
func ValidRegion(s string) bool { return regionRE.MatchString(s) }

// FenceClient returns the DynamoDB client the fence store must use:
// client itself when region is "" or client's own region, otherwise a copy
// of client that signs for and calls region (Env.FenceTableRegion). Under
// fenced-effects every region's executor takes its fencing tokens from the
// FenceTable of the ONE home region: a token from a replica-local table
// would not be linearizable across regions, which is the whole point of the
// fence. Everything else about client (credentials, retries, middleware,
// BaseEndpoint such as DYNAMODB_ENDPOINT) is kept.
func FenceClient(client *dynamodb.Client, region string) *dynamodb.Client {
	if region == "" || region == client.Options().Region {
		return client
	}
	return dynamodb.New(client.Options(), func(o *dynamodb.Options) { o.Region = region })
}
