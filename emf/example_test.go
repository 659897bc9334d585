package emf_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/emf"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A Guard with EMF metrics: each claim outcome is one JSON line on the writer.
func ExampleNew() {
	var out bytes.Buffer
	g, err := idem.New(idem.Config{
		Tenant:  idem.AuthorizerKey("tenantId"),
		Store:   memstore.New(),
		Metrics: emf.New(&out, "idemkit"),
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	h := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{}`}, nil
	})
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /orders",
		Headers:  map[string]string{"idempotency-key": "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6c"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}},
		},
	}
	_, _ = h(context.Background(), ev)
	_, _ = h(context.Background(), ev)
	fmt.Println(strings.Count(out.String(), `"CloudWatchMetrics"`) >= 2, strings.Contains(out.String(), "0b7c3f6e"))
	// Output:
	// true false
}
