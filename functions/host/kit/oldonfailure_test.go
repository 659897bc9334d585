package kit_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
)

// TestRunsStoreKnowsDynamoDBReturnsTheRefusedItem: on DynamoDB itself (a
// client with no endpoint override) the kit's runs store is told that a
// refused write returns the item it found whenever there is one, so a
// refused write of no run is not read back (RED_TEAM 521); under an
// endpoint override (an emulator, which may return none) it is not told,
// and reads as before.
func TestRunsStoreKnowsDynamoDBReturnsTheRefusedItem(t *testing.T) {
	for _, c := range []struct {
		name     string
		endpoint *string
		want     bool
	}{
		{"DynamoDB", nil, true},
		{"an endpoint override", aws.String("http://127.0.0.1:8000"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := dynamodb.New(dynamodb.Options{Region: "eu-west-1", BaseEndpoint: c.endpoint})
			k, err := kit.NewKit(kit.Config{Env: settings.Env{RunsTable: "RunsTable"}, Client: client, Parts: kit.Parts{Runs: true}})
			if err != nil {
				t.Fatal(err)
			}
			if got := k.Runs.(*runs.DynamoRuns).ReturnsOldOnConditionFailure; got != c.want {
				t.Fatalf("ReturnsOldOnConditionFailure %v, want %v", got, c.want)
			}
		})
	}
}
