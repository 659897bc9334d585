package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/faultrx"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// The function's two triggers reach one handler: a runs-stream event starts
// a run (which parks on a 429 with Retry-After), and the minute schedule's
// {"resumeDue": true} resumes it once due; before then it sends nothing.
func TestHandleInvokeDispatchesStreamAndSchedule(t *testing.T) {
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}, Jitter: func(d time.Duration) time.Duration { return d }}})
	if err != nil {
		t.Fatal(err)
	}
	rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Sequence(faultrx.TooMany(clk.Now().Add(90*time.Second).Format(http.TimeFormat)), faultrx.OK)})
	defer rx.Close()
	runs := hostruns.NewMemRuns()
	x := &Executor{Runs: runs, Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Test: webhook.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}}}
	in, _ := json.Marshal(map[string]any{"url": rx.URL(), "payload": 1})
	run := hostruns.NewRun("acme", webhook.WorkflowWebhook, in, clk.Now())
	if err := runs.Create(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	stream := `{"Records":[{"eventID":"e1","eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"` + run.ID +
		`"},"tenant":{"S":"acme"},"workflowId":{"S":"webhook"},"status":{"S":"pending"}}}}]}`
	if _, err := x.HandleInvoke(context.Background(), json.RawMessage(stream)); err != nil {
		t.Fatal(err)
	}
	r, _ := runs.Get(context.Background(), run.ID)
	// An HTTP-date Retry-After is honoured (whole seconds).
	if r.Status != hostruns.StatusRunning || r.Wake.At.Sub(clk.Now()) < 89*time.Second || rx.Count() != 1 {
		t.Fatalf("after the stream event: %s, wake in %s, %d deliveries", r.Status, r.Wake.At.Sub(clk.Now()), rx.Count())
	}
	resume := json.RawMessage(`{"resumeDue": true}`)
	if _, err := x.HandleInvoke(context.Background(), resume); err != nil || rx.Count() != 1 {
		t.Fatalf("early schedule pass: %v, %d deliveries", err, rx.Count())
	}
	clk.Set(r.Wake.At)
	out, err := x.HandleInvoke(context.Background(), resume)
	if err != nil || rx.Count() != 2 {
		t.Fatalf("due pass: %v %v, %d deliveries", out, err, rx.Count())
	}
	if r, _ := runs.Get(context.Background(), run.ID); r.Status != hostruns.StatusCompleted || !r.Wake.IsZero() {
		t.Fatalf("run %s, wake %v", r.Status, r.Wake)
	}
	if _, err := x.HandleInvoke(context.Background(), json.RawMessage(`not json`)); err == nil {
		t.Fatal("undecodable event accepted")
	}
}
