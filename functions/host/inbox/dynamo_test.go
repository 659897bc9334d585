package inbox_test

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/inbox/inboxtest"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestConformance runs the suite over Dynamo on every emulator
// (DYNAMOTEST_KINDS picks them), with responses really lost after the
// write applied (dynamotest.Faults).
func TestConformance(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		var faults *dynamotest.Faults
		inboxtest.Run(t, inboxtest.Harness{
			NewStore: func(t *testing.T, cfg inbox.Config) inbox.Store {
				faults = dynamotest.NewFaults()
				s, err := inbox.NewDynamo(inbox.DynamoConfig{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable"), Config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			LoseNextResponse: func(t *testing.T) {
				if faults.Pending() != 0 {
					t.Fatal("the previous lost response was never injected")
				}
				faults.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			},
		})
	})
}

func TestNewDynamoReportsEveryConfigProblem(t *testing.T) {
	_, err := inbox.NewDynamo(inbox.DynamoConfig{})
	if err == nil || err.Error() != "inbox: Config.Client is required; Config.Table is required" {
		t.Fatalf("NewDynamo: %v", err)
	}
}
