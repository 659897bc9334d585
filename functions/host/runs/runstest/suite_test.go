package runstest_test

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/runstest"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestMemRuns(t *testing.T) {
	runstest.Run(t, runstest.Harness{NewStore: func(*testing.T) runstest.Store { return runs.NewMemRuns() }})
}

func TestDynamoRuns(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults, counter := dynamotest.NewFaults(), dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, counter.Middleware(), faults.Middleware())
		runstest.Run(t, runstest.Harness{
			NewStore: func(t *testing.T) runstest.Store {
				faults.Clear()
				t.Cleanup(func() {
					if n := faults.Pending(); n != 0 {
						t.Errorf("%d armed lost answers never happened", n)
					}
				})
				return &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
			},
			// The write applies, its response is lost, the SDK retries.
			LoseNextAnswer:  func(op string) { faults.FailNextAfterSend(op, 1, dynamotest.ResponseLost()) },
			RoundTrips:      counter.Total,
			ResetRoundTrips: counter.Reset,
		})
	})
}
