package apifn

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// openAPIDoc is this host's own OpenAPI 3.1 document (openapi.json, checked
// in beside the route table): exactly the operations Routes serves, each
// under the OpenWOP v2 API's operation id for its method and path, with the
// headers they honour, the answers and error envelope they give and the
// bearer scheme they use. TestOpenAPIDocumentIsTheRouteTable holds it to
// Routes both ways, TestOpenAPIOperationsAreOpenWOPs to the OpenWOP
// document. A new route is a row in Routes and an operation in
// openapi.json.
//
//go:embed openapi.json
var openAPIDoc []byte

// compactOpenAPI is openAPIDoc without its indentation, as it is served.
func compactOpenAPI() ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, openAPIDoc); err != nil {
		return nil, fmt.Errorf("apifn: the embedded openapi.json is not JSON: %w", err)
	}
	return b.Bytes(), nil
}

// servedOpenAPI is compactOpenAPI, done once per process on the first
// GET /openapi.json rather than at start-up: compacting the document
// took about 1 ms of the api function's cold start (the traced start's
// wiring phase), for a route few invocations serve.
var servedOpenAPI = sync.OnceValues(compactOpenAPI)

// openAPI serves this host's OpenAPI document (GET /openapi.json,
// getOpenApiSpec, no credential) with the discovery document's headers.
func (h *Handler) openAPI(_ context.Context, _ call) (events.APIGatewayV2HTTPResponse, error) {
	spec, err := servedOpenAPI()
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return publicDoc(spec), nil
}
