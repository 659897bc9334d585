package apifn_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/api/apifn"
	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// A client follows a run through GET /runs/{runId}/events, re-polling with
// Last-Event-ID: each answer is a snapshot that closes after the current
// state, and every event arrives once.
func ExampleRunEvents() {
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	guard, _ := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: quiet})
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	runs := hostruns.NewMemRuns()
	h, _ := apifn.New(apifn.Config{Runs: runs, Guard: guard, Ledger: l, Logger: quiet})

	get := func(path, lastEventID string) {
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, Headers: map[string]string{}}
		ev.RequestContext.HTTP.Method = "GET"
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
		if lastEventID != "" {
			ev.Headers["last-event-id"] = lastEventID
		}
		resp, _ := h.Handle(context.Background(), ev)
		fmt.Println(resp.StatusCode, resp.Headers["Content-Type"])
		sc := bufio.NewScanner(strings.NewReader(resp.Body))
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "id:") || strings.HasPrefix(line, "event:") || strings.HasPrefix(line, "retry:") {
				fmt.Println(" ", line)
			}
		}
	}

	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	run := hostruns.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), created)
	_ = runs.Create(context.Background(), run)
	path := "/runs/" + hostruns.ProjectID(run.ID) + "/events"

	get(path, "") // pending: run.started, and a hint to come back
	_, _ = runs.Transition(context.Background(), run.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusRunning, "", created.Add(time.Second))
	_, _ = runs.Transition(context.Background(), run.ID, []hostruns.Status{hostruns.StatusRunning}, hostruns.StatusCompleted, "", created.Add(2*time.Second))
	get(path, "0") // only what came after event 0; the stream is over
	// Output:
	// 200 text/event-stream
	//   retry: 2000
	//   id: 0
	//   event: run.started
	// 200 text/event-stream
	//   id: 1
	//   event: run.completed
}
