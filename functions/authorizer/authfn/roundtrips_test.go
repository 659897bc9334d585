package authfn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestAuthorizerRoundTrips pins the authorizer's DynamoDB round trips per
// request on every engine: one consistent GetItem of the ApiKeysTable for
// a well-formed key, known or not (an unknown key costs what a known one
// does), and none for a request without a well-formed Bearer key.
func TestAuthorizerRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		keys := &apikeys.DynamoKeys{Client: e.Client(dynamotest.FastRetries, cnt.Middleware()), Table: e.CreateTable(t, "ApiKeysTable")}
		key := apikeys.NewAPIKey()
		if err := keys.PutCredential(ctx, key, apikeys.Credential{Tenant: "acme", Attrs: map[string]string{"namespace": "shop"}}); err != nil {
			t.Fatal(err)
		}
		h := &Handler{Keys: keys, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		oneRead := map[string]int{"GetItem": 1}
		for _, c := range []struct {
			name, authz string
			ok          bool
			want        map[string]int
		}{
			{"a known key", "Bearer " + key, true, oneRead},
			{"an unknown key", "Bearer " + apikeys.NewAPIKey(), false, oneRead},
			{"no Authorization", "", false, map[string]int{}},
			{"another scheme", "Basic " + key, false, map[string]int{}},
			{"a malformed key", "Bearer a b", false, map[string]int{}},
		} {
			cnt.Reset()
			req := events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{}}
			if c.authz != "" {
				req.Headers["authorization"] = c.authz
			}
			r, err := h.Handle(ctx, req)
			if c.ok != (err == nil && r.IsAuthorized) || (!c.ok && !errors.Is(err, ErrUnauthorized)) {
				t.Errorf("%s: %+v %v", c.name, r, err)
			}
			if got := cnt.Ops(); !maps.Equal(got, c.want) {
				t.Errorf("%s: round trips %v, want %v", c.name, got, c.want)
			}
		}
	})
}
