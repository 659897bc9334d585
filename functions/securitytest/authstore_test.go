package securitytest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/boot"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// faultyKeysClient is the authorizer's DynamoDB client with the quoting
// faults added to each call, after the client's own options.
type faultyKeysClient struct {
	*dynamodb.Client
	faults *quotingFaults
}

func (c faultyKeysClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return c.Client.GetItem(ctx, in, append(opts, c.faults.middleware)...)
}

// TestAuthorizerLogsNoKeyOnQuotingStoreFailures: the authorizer on the
// client its main builds (boot.DynamoClient) against DynamoDB (moto), its
// key lookup failing with a ValidationException and an
// InternalServerError whose message quotes the item key it was sent (the
// key's stored hash): the request is refused as an error, never granted,
// and neither the API key, nor its stored hash, nor that hash's hex
// digits appear in any log line or in the error Lambda would log.
func TestAuthorizerLogsNoKeyOnQuotingStoreFailures(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	t.Setenv("AWS_REGION", e.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	ctx := context.Background()
	client, err := boot.DynamoClient(ctx, e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	table := e.CreateTable(t, "ApiKeysTable")
	key := "idk_" + marker + "-authorizer-store-failure"
	faults := &quotingFaults{}
	keys := &apikeys.DynamoKeys{Client: faultyKeysClient{client, faults}, Table: table}
	if err := keys.PutKey(ctx, key, tenant); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	h := &authfn.Handler{Keys: keys, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ask := func() (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		v := "Bearer " + key
		return h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": v}, IdentitySource: []string{v}})
	}
	if r, err := ask(); err != nil || !r.IsAuthorized {
		t.Fatalf("the key before any fault: %+v %v", r, err)
	}
	hash := apikeys.HashKey(key)
	var errs []string
	for _, code := range []string{"ValidationException", "InternalServerError"} {
		faults.arm("GetItem", code, 3)
		r, err := ask()
		faults.arm("", "", 0)
		if err == nil || errors.Is(err, authfn.ErrUnauthorized) || r.IsAuthorized {
			t.Errorf("%s: %+v %v, want a key-store error", code, r, err)
			continue
		}
		errs = append(errs, err.Error())
	}
	out := logs.String()
	if !strings.Contains(out, "One or more parameter values were invalid") {
		t.Fatalf("no store error was logged: the test proves nothing\n%s", out)
	}
	for _, s := range append([]string{out}, errs...) {
		for _, secret := range []string{marker, hash, strings.TrimPrefix(hash, "key#")} {
			if i := strings.Index(s, secret); i >= 0 {
				t.Errorf("a log line or error carries %.20s…: ...%s...", secret, s[max(0, i-200):min(len(s), i+100)])
			}
		}
	}
}
