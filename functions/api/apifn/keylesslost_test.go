package apifn

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestKeylessCreateWhoseEveryAnswerWasLostIsAnsweredItsRun: a POST /runs
// without a key whose run write landed while every answer of it was lost
// (lost, then throttled until the SDK gave up) is answered 201 with that
// run, as one whose answer was lost once is: an error here left the run
// to execute while its client, told to try again, created a second
// (RED_TEAM 523). On every emulator.
func TestKeylessCreateWhoseEveryAnswerWasLostIsAnsweredItsRun(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		f := hostOf(t, rs, idem.Config{}, nil)
		for _, c := range []struct {
			name string
			arm  func()
		}{
			{"lost then throttled", func() {
				faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
				faults.FailNext("PutItem", 2, dynamotest.Throttle())
			}},
			{"lost on every try", func() { faults.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost()) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.arm()
				r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
				faults.Clear()
				id, _ := m["runId"].(string)
				if r.StatusCode != 201 || id == "" {
					t.Fatalf("a keyless create whose run write landed: %d %v, want 201 with its run", r.StatusCode, m)
				}
				if got, err := rs.Get(t.Context(), id); err != nil || got.Status != runs.StatusPending {
					t.Fatalf("the run answered: %+v %v", got, err)
				}
			})
		}
	})
}
