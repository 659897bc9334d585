package dynamostore

import (
	"context"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// ResolveEndpointOnce is a client option (dynamodb.NewFromConfig(cfg,
// dynamostore.ResolveEndpointOnce)) that makes the client resolve its
// endpoint with the SDK's own rules once per distinct set of endpoint
// parameters and reuse the answer, instead of evaluating the rules on every
// call. The rules are a pure function of those parameters (region, FIPS,
// dual-stack, endpoint override, account id and mode, resource ARNs), so the
// endpoint, signing name and signing region are the same as without the
// option. It also turns account-id-based endpoints off
// (aws.AccountIDEndpointModeDisabled): the client uses the regional
// endpoint, as it does whenever the credentials carry no account id (the
// Lambda role's do not).
//
// On a DynamoDB call the rules evaluation is about a fifth of the Go SDK's
// client CPU (docs/PERFORMANCE.md); the functions of the SAM stack and
// `idemkit dev` use this option. It composes with a BaseEndpoint
// (DYNAMODB_ENDPOINT) and keeps a custom EndpointResolverV2 already set on
// the options, which it then caches the same way.
//
// The cache holds at most 64 parameter sets (a client sees one per region
// and endpoint, plus one per table ARN used as a table name); beyond that
// it resolves without caching.
func ResolveEndpointOnce(o *dynamodb.Options) {
	next := o.EndpointResolverV2
	if next == nil {
		next = dynamodb.NewDefaultEndpointResolverV2()
	}
	if _, ok := next.(*onceResolver); !ok {
		o.EndpointResolverV2 = &onceResolver{next: next, cache: make(map[endpointKey]smithyendpoints.Endpoint)}
	}
	o.AccountIDEndpointMode = aws.AccountIDEndpointModeDisabled
}

// maxCachedEndpoints bounds onceResolver's cache.
const maxCachedEndpoints = 64

// onceResolver caches next's answers by the value of the parameters.
// Hand-written because the SDK offers no caching resolver; the rules
// themselves stay the SDK's.
type onceResolver struct {
	next  dynamodb.EndpointResolverV2
	mu    sync.RWMutex
	cache map[endpointKey]smithyendpoints.Endpoint
}

// endpointKey is dynamodb.EndpointParameters by value.
type endpointKey struct {
	region, endpoint, accountID, accountMode, arn, arns string
	dualStack, fips                                     bool
}

func keyOf(p dynamodb.EndpointParameters) endpointKey {
	return endpointKey{
		region: aws.ToString(p.Region), endpoint: aws.ToString(p.Endpoint),
		accountID: aws.ToString(p.AccountId), accountMode: aws.ToString(p.AccountIdEndpointMode),
		arn: aws.ToString(p.ResourceArn), arns: strings.Join(p.ResourceArnList, "\x00"),
		dualStack: aws.ToBool(p.UseDualStack), fips: aws.ToBool(p.UseFIPS),
	}
}

// ResolveEndpoint implements dynamodb.EndpointResolverV2. The Endpoint
// returned is shared between calls; the SDK only reads it.
func (r *onceResolver) ResolveEndpoint(ctx context.Context, p dynamodb.EndpointParameters) (smithyendpoints.Endpoint, error) {
	k := keyOf(p)
	r.mu.RLock()
	ep, ok := r.cache[k]
	r.mu.RUnlock()
	if ok {
		return ep, nil
	}
	ep, err := r.next.ResolveEndpoint(ctx, p)
	if err != nil {
		return ep, err
	}
	r.mu.Lock()
	if len(r.cache) < maxCachedEndpoints {
		r.cache[k] = ep
	}
	r.mu.Unlock()
	return ep, nil
}
