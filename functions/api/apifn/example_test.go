package apifn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// The api handler wired with in-memory stores, as a test or an embedding
// host would: the same createRun twice with one Idempotency-Key creates one
// run, and the second answer is the first one replayed.
func Example() {
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	guard, _ := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: quiet})
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	runs := runs.NewMemRuns()
	h, err := apifn.New(apifn.Config{Runs: runs, Guard: guard, Ledger: l, Logger: quiet})
	if err != nil {
		panic(err)
	}

	post := func() events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/runs", Body: `{"workflowId":"conformance-noop"}`,
			Headers: map[string]string{"content-type": "application/json", "idempotency-key": "0f8e2c1a-7b5d-4e3f-9a6c-1d2b3c4d5e6f"}}
		ev.RequestContext.HTTP.Method = "POST"
		// What the authorizer function puts in the context:
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
		resp, _ := h.Handle(context.Background(), ev)
		return resp
	}
	first, second := post(), post()
	var a, b map[string]any
	_ = json.Unmarshal([]byte(first.Body), &a)
	_ = json.Unmarshal([]byte(second.Body), &b)
	fmt.Println(first.StatusCode, second.StatusCode, a["runId"] == b["runId"], runs.Len())
	for k, v := range second.Headers {
		if k == "Openwop-Idempotent-Replay" {
			fmt.Println(k+":", v)
		}
	}
	// Output:
	// 201 201 true 1
	// Openwop-Idempotent-Replay: true
}
