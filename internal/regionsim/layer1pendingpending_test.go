package regionsim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// txGate holds a region's first TransactWriteItems (createRun's
// completion, which writes the run with the record) until released.
type txGate struct {
	armed            atomic.Bool
	entered, release chan struct{}
}

func newTxGate() *txGate {
	g := &txGate{entered: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *txGate) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("regionsim-tx-gate",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if _, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok && g.armed.CompareAndSwap(true, false) {
					close(g.entered)
					<-g.release
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// TestLayer1PendingOverPendingCreatesOneRun: the interleaving
// MULTI_REGION.md states as a limit of the lowest-run-id rule, through the
// deployable api's createRun under reconciled-records: one key claimed in
// eu and in us during a partition, both requests still running (before
// the completion that writes the run with the record) when the partition
// heals, and us's pending claim, the newer write, replicates over eu's.
// eu's completion is then refused (its claim is gone), and with it the
// run it would have written: whichever request completes first, one run
// is created, both regions end on the record naming it, and the key
// replays it in both (the refused request is answered 409
// idempotency_in_flight, to be retried).
func TestLayer1PendingOverPendingCreatesOneRun(t *testing.T) {
	for _, first := range []string{eu, us} {
		t.Run(first+"-completes-first", func(t *testing.T) {
			gates := map[string]*txGate{eu: newTxGate(), us: newTxGate()}
			w := newAPIRegions(t, "create", false, map[string]func(*dynamodb.Options){eu: gates[eu].option, us: gates[us].option})
			w.step()
			w.rep.SetPartitioned(true)
			answers := map[string]chan events.APIGatewayV2HTTPResponse{eu: make(chan events.APIGatewayV2HTTPResponse, 1), us: make(chan events.APIGatewayV2HTTPResponse, 1)}
			for _, r := range []string{eu, us} {
				go func() { answers[r] <- w.send(r, "req-"+r) }()
				<-gates[r].entered // claimed, its completion held
				w.step()           // the claim observed, eu's first
			}
			w.rep.SetPartitioned(false)
			w.clock.Advance(2 * time.Second) // past the lag
			if err := w.rep.Sync(ctx(t)); err != nil {
				t.Fatal(err)
			}
			created := map[string]bool{}
			for _, r := range []string{first, map[string]string{eu: us, us: eu}[first]} {
				close(gates[r].release)
				resp := <-answers[r]
				var b struct {
					RunID string `json:"runId"`
				}
				if resp.StatusCode == http.StatusCreated && json.Unmarshal([]byte(resp.Body), &b) == nil && b.RunID != "" {
					created[b.RunID] = true
				}
				t.Logf("%s answered %d %s", r, resp.StatusCode, resp.Body)
				w.step()
			}
			w.heal()
			if len(created) != 1 {
				t.Fatalf("the 201s name %d runs; want one", len(created))
			}
			var run string
			for run = range created {
			}
			for _, r := range []string{eu, us} {
				if got := w.recordRun(r); got != run {
					t.Errorf("%s's replica holds the record naming %q; want %s", r, got, run)
				}
				again := w.send(r, "req-again-"+r)
				if again.StatusCode != http.StatusCreated || !replayed(again.Headers) || !strings.Contains(again.Body, run) {
					t.Errorf("%s: the key again: %d %s; want a replay of %s", r, again.StatusCode, again.Body, run)
				}
			}
			n := 0
			for _, r := range []string{eu, us} {
				if _, err := w.store[r].Get(ctx(t), run); err == nil {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("the run exists in %d regions; want the one that created it", n)
			}
		})
	}
}
