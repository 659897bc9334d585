package devstack

import (
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// devIdleConns is how many idle connections to the engine the stack's
// DynamoDB client keeps. The SDK's default keeps 10 per host, which suits
// a Lambda function (one request at a time) but not the dev server, whose
// concurrent requests and executor make more calls at once than that: past
// 10, every call that finished closed its connection and the next one
// dialled a new one, which the engine had to accept and set up again.
const devIdleConns = 256

// keepConns is a DynamoDB client option: the client keeps up to
// devIdleConns idle connections to the engine.
func keepConns(o *dynamodb.Options) {
	o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns, t.MaxIdleConnsPerHost = devIdleConns, devIdleConns
	})
}
