package apifn

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// slowRuns holds the first Create until released: a createRun still
// executing.
type slowRuns struct {
	runs.RunStore
	once             sync.Once
	entered, release chan struct{}
}

func (s *slowRuns) Create(ctx context.Context, r runs.Run) error {
	first := false
	s.once.Do(func() { first = true; close(s.entered) })
	if first {
		<-s.release
	}
	return s.RunStore.Create(ctx, r)
}

// TestCommerceSyncDuplicateOfExecutingCreateGetsThePendingAction: on the
// reference host under the commerce policy, a sync duplicate (no mode, or
// Idempotency-Mode: sync) of a POST /runs still executing when its wait
// budget ends (none, or a short one) is answered the pending answer: 202
// with Retry-After, Idempotent-Replayed: true and status pending, never
// 409 idempotency_in_flight; its run is not written yet (held before its
// write), so the answer names none; the run is created once and the key
// then replays that run. On every engine.
func TestCommerceSyncDuplicateOfExecutingCreateGetsThePendingAction(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for i, wait := range []time.Duration{-1, 30 * time.Millisecond} {
			c := e.Client(dynamotest.FastRetries)
			rs := &slowRuns{RunStore: &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}, entered: make(chan struct{}), release: make(chan struct{})}
			st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
			if err != nil {
				t.Fatal(err)
			}
			f := hostOf(t, rs, idem.Config{Policy: commerce.Policy, Store: st, Wait: wait}, nil)
			key := []string{"checkout cart 50", "checkout cart 51"}[i]
			first := make(chan events.APIGatewayV2HTTPResponse, 1)
			go func() {
				r, _ := f.h.Handle(context.Background(), commerceCreate(key, ""))
				first <- r
			}()
			<-rs.entered
			var bad string
			for _, mode := range []string{"", "sync"} {
				r, m := f.do(t, commerceCreate(key, mode))
				if r.StatusCode != 202 || r.Headers["Retry-After"] == "" || r.Headers[commerce.HeaderIdempotentReplay] != "true" || m["status"] != "pending" || m["runId"] != nil {
					bad = mode
					t.Errorf("wait %v, mode %q, the create still executing: %d %v %s; want 202, the pending answer with Retry-After naming no run (none is written)", wait, mode, r.StatusCode, r.Headers, r.Body)
				}
			}
			close(rs.release)
			r1 := <-first
			if bad != "" || r1.StatusCode != 201 {
				t.Fatalf("first: %d %s", r1.StatusCode, r1.Body)
			}
			// The run (no executor here) is still pending: the replay is
			// that pending Action, the one run the first request created.
			r, m := f.do(t, commerceCreate(key, ""))
			if r.StatusCode != 202 || r.Headers[commerce.HeaderIdempotentReplay] != "true" || m["runId"] == nil || m["status"] != "pending" {
				t.Fatalf("after the create finished: %d %v %s, want the pending run replayed", r.StatusCode, r.Headers, r.Body)
			}
		}
	})
}
