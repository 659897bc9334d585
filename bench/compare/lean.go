package main

import (
	"context"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// leanOptions is the CPU pass's second client configuration: the
// endpoint resolved once (no rules evaluation per call), no client-side
// retry rate limiter (no token bucket per call) and account-id endpoints
// off. It measures how much of the SDK's per-call CPU a client
// configuration can remove; the figures in the report's first columns use
// the default configuration.
func leanOptions(endpoint string) func(*dynamodb.Options) {
	u, err := url.Parse(endpoint)
	return func(o *dynamodb.Options) {
		if err == nil {
			o.EndpointResolverV2 = staticEndpoint{smithyendpoints.Endpoint{URI: *u}}
		}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) { so.RateLimiter = ratelimit.None })
		o.AccountIDEndpointMode = aws.AccountIDEndpointModeDisabled
	}
}

type staticEndpoint struct{ ep smithyendpoints.Endpoint }

func (s staticEndpoint) ResolveEndpoint(context.Context, dynamodb.EndpointParameters) (smithyendpoints.Endpoint, error) {
	return s.ep, nil
}
