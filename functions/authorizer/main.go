// Command authorizer is the HTTP API Lambda authorizer function (bootstrap
// for provided.al2023): wiring only; the handler is
// functions/authorizer/authfn.
//
// It needs one table read per decision, so it starts from functions/host/boot
// alone (logger, environment, DynamoDB client): it links neither the
// protocol packages (idem, ledger) nor the settings table, and reads only
// the two variables it uses (API_KEYS_TABLE, required; DYNAMODB_ENDPOINT).
// It counts refused keys (authfn.MetricRefusals) as EMF on stdout under
// metricsNamespace, the settings' METRICS_NAMESPACE default (the stack
// sets no other).
package main

import (
	"context"
	"errors"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/boot"
	"github.com/idemkit/idemkit/internal/emf"
)

// The variables the authorizer reads: the settings table's API_KEYS_TABLE
// and DYNAMODB_ENDPOINT (main_test.go keeps the names equal).
const (
	envAPIKeysTable     = "API_KEYS_TABLE"
	envDynamoDBEndpoint = "DYNAMODB_ENDPOINT"
)

// metricsNamespace is the namespace of the authorizer's metrics: the
// settings' METRICS_NAMESPACE default, which the stack's alarms watch
// (main_test.go keeps them equal).
const metricsNamespace = "idemkit"

func main() {
	boot.Trace("main")
	logger := boot.Logger()
	table := boot.Getenv(envAPIKeysTable)
	if table == "" {
		boot.Must(logger, "authorizer", "configuration", errors.New("host: missing environment: "+envAPIKeysTable))
	}
	boot.Trace("settings")
	client, err := boot.DynamoClient(context.Background(), boot.Getenv(envDynamoDBEndpoint))
	boot.Must(logger, "authorizer", "aws", err)
	h := &authfn.Handler{Keys: &apikeys.DynamoKeys{Client: client, Table: table}, Logger: logger, Metrics: emf.New(os.Stdout, metricsNamespace)}
	boot.Trace("wiring")
	lambda.Start(h.Handle)
}
