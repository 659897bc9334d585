package apifn

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// faultyHost is a host on e (its runs committed in the completion
// transaction when transactional) whose DynamoDB calls fail as faults
// tells them, under a skewed clock.
func faultyHost(t *testing.T, e *dynamotest.Emulator, transactional bool) (*fixture, *runs.DynamoRuns, *skewedClock, *dynamotest.Faults) {
	t.Helper()
	faults := dynamotest.NewFaults()
	c := e.Client(dynamotest.FastRetries, faults.Middleware())
	store, st := dynamoStores(t, e, c, transactional)
	clk := &skewedClock{}
	f := hostOf(t, store, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
	return f, store, clk, faults
}

// requestIDs gives each request its own API Gateway request id, as a
// client's retries have.
type requestIDs struct{ n atomic.Int64 }

// enforced is enforced(tenant, key, scope) with a request id of its own.
func (q *requestIDs) enforced(tenant, key, scope string) events.APIGatewayV2HTTPRequest {
	e := enforced(tenant, key, scope)
	e.RequestContext.RequestID = "req-" + strconv.FormatInt(q.n.Add(1), 10)
	return e
}

// interruptCreate sends f req, a keyed enforced create, with faults armed
// so that its claim and its scope's write land and its run's write does
// not (the completion transaction fails, when transactional); the create
// must answer 5xx. Its scope is then held by a run that was never written.
func interruptCreate(t *testing.T, f *fixture, faults *dynamotest.Faults, transactional bool, req events.APIGatewayV2HTTPRequest) {
	t.Helper()
	if transactional {
		faults.FailNext("TransactWriteItems", 50, dynamotest.InternalServerError())
	} else {
		faults.PassNext("PutItem", 2)
		faults.FailNext("PutItem", 50, dynamotest.InternalServerError())
	}
	r, _ := f.h.Handle(context.Background(), req)
	faults.Clear()
	if r.StatusCode < 500 {
		t.Fatalf("the interrupted create answered %d %s", r.StatusCode, r.Body)
	}
}
