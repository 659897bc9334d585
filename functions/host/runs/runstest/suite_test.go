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
		c := e.Client(dynamotest.FastRetries)
		runstest.Run(t, runstest.Harness{NewStore: func(t *testing.T) runstest.Store {
			return &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		}})
	})
}
