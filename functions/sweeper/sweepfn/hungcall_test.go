package sweepfn_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// hung is a table whose every call never answers (a connection that
// hangs: the SDK's client bounds no call by a time of its own) until the
// call's context ends; it keeps the deadline each call was given.
type hung struct {
	mu        sync.Mutex
	deadlines []time.Time
}

func (h *hung) wait(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	h.mu.Lock()
	if ok {
		h.deadlines = append(h.deadlines, dl)
	} else {
		h.deadlines = append(h.deadlines, time.Time{})
	}
	h.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (h *hung) Scan(ctx context.Context, _ *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, h.wait(ctx)
}

func (h *hung) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, h.wait(ctx)
}

// A call that never answers, issued before the stop point, ran until the
// invocation's own deadline: Lambda ends the invocation there, so the run
// was cut as a timeout before it could emit its metrics. Its table's
// incomplete_total had no datapoint (a missing datapoint, which the
// sweeper-incomplete alarm treats as not breaching and the package says
// means the sweeper did not run) and its log line was never written. Each
// call is now bounded by the deadline less half the margin: the run ends
// failed, but reports first (RED_TEAM 437).
func TestHungCallEndsBeforeTheDeadlineAndIsReported(t *testing.T) {
	const margin = 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dl, _ := ctx.Deadline()
	// The run's clock stays well before the stop point: only a bound on
	// the call itself can end it before the deadline.
	t0 := dl.Add(-time.Hour)
	// The invocation's deadline, a little ahead of the real clock.
	lambdaCtx, cancelLambda := context.WithDeadline(ctx, time.Now().Add(2*margin))
	defer cancelLambda()
	lambdaDL, _ := lambdaCtx.Deadline()
	api := &hung{}
	var out syncBuf
	h := &sweepfn.Handler{Margin: margin, Now: func() time.Time { return t0 }, Metrics: emf.New(&out, ""),
		Targets: []sweepfn.Target{{Label: sweepfn.TableEffects, Sweeper: &sweeper.Sweeper{API: api, Table: "effects", KeyAttrs: []string{"pk", "sk"}}}}}
	rep, err := h.Sweep(lambdaCtx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || rep.Tables[0].Complete {
		t.Fatalf("a run whose call never answered: %+v, %v; want it failed, incomplete", rep, err)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.deadlines) != 1 {
		t.Fatalf("%d calls, want the one Scan", len(api.deadlines))
	}
	if got, want := api.deadlines[0], lambdaDL.Add(-margin/2); got.IsZero() || got.After(want) {
		t.Fatalf("the call was bounded by %v, %v before the invocation's deadline; want at least %v before it",
			got, lambdaDL.Sub(got), margin/2)
	}
	// Both series have their datapoint; incomplete_total is 0, as for
	// every failed run (the invocation's error pages it: RED_TEAM 545).
	m := metrics(t, out.String())
	if v, ok := m[sweepfn.MetricIncomplete+" effects"]; !ok || v != 0 {
		t.Fatalf("metrics %v: want incomplete_total 0 emitted for the effects table", m)
	}
	if _, ok := m[sweepfn.MetricDeleted+" effects"]; !ok {
		t.Fatalf("metrics %v: want deleted_total emitted for the effects table", m)
	}
}
