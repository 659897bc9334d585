package dynamostore

import (
	"context"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestResolveEndpointOnceAnswersAsTheRules: for every parameter set, the
// cached resolver gives what the SDK's rules give, on the first call and
// on the repeat; different parameters never share an answer.
func TestResolveEndpointOnceAnswersAsTheRules(t *testing.T) {
	var o dynamodb.Options
	ResolveEndpointOnce(&o)
	if o.AccountIDEndpointMode != aws.AccountIDEndpointModeDisabled {
		t.Fatalf("account-id endpoints: %q, want disabled", o.AccountIDEndpointMode)
	}
	rules := dynamodb.NewDefaultEndpointResolverV2()
	ctx := context.Background()
	cases := []dynamodb.EndpointParameters{
		{Region: aws.String("us-east-1"), UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(false)},
		{Region: aws.String("eu-west-1"), UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(false)},
		{Region: aws.String("us-east-1"), UseFIPS: aws.Bool(true), UseDualStack: aws.Bool(false)},
		{Region: aws.String("us-east-1"), UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(true)},
		{Region: aws.String("us-east-1"), UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(false), Endpoint: aws.String("http://127.0.0.1:8000")},
		{Region: aws.String("cn-north-1"), UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(false)},
	}
	for round := 0; round < 2; round++ {
		for _, p := range cases {
			want, err := rules.ResolveEndpoint(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.EndpointResolverV2.ResolveEndpoint(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if got.URI.String() != want.URI.String() || !reflect.DeepEqual(got.Properties, want.Properties) {
				t.Errorf("round %d, region %s: got %s %v, want %s %v", round, *p.Region, got.URI.String(), got.Properties, want.URI.String(), want.Properties)
			}
		}
	}
	// An invalid parameter set is the rules' error, and is not cached.
	if _, err := o.EndpointResolverV2.ResolveEndpoint(ctx, dynamodb.EndpointParameters{}); err == nil {
		t.Error("no region: want the rules' error")
	}
	if n := len(o.EndpointResolverV2.(*onceResolver).cache); n != len(cases) {
		t.Errorf("cache holds %d entries, want %d", n, len(cases))
	}
	// Applying the option twice does not stack two caches.
	ResolveEndpointOnce(&o)
	if _, ok := o.EndpointResolverV2.(*onceResolver).next.(*onceResolver); ok {
		t.Error("option applied twice wraps its own cache")
	}
}
