// Command authorizer is the HTTP API Lambda authorizer function (bootstrap
// for provided.al2023): wiring only; the handler is
// functions/authorizer/authfn.
//
// It needs one table read per decision, so it starts from functions/host/boot
// alone (logger, environment, DynamoDB client): it links neither the
// protocol packages (idem, ledger) nor the settings table, and reads only
// the three variables it uses (API_KEYS_TABLE, required; DYNAMODB_ENDPOINT;
// METRICS_NAMESPACE). It counts refused keys (authfn.MetricRefusals) as EMF
// on stdout under METRICS_NAMESPACE, default metricsNamespace, the
// settings' default: the stack gives it the stack's own namespace, the
// one its authorizer-errors alarm subtracts the refusals of.
package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/boot"
	"github.com/idemkit/idemkit/internal/emf"
)

// The variables the authorizer reads: the settings table's API_KEYS_TABLE,
// DYNAMODB_ENDPOINT and METRICS_NAMESPACE (main_test.go keeps the names
// equal).
const (
	envAPIKeysTable     = "API_KEYS_TABLE"
	envDynamoDBEndpoint = "DYNAMODB_ENDPOINT"
	envMetricsNamespace = "METRICS_NAMESPACE"
)

// metricsNamespace is the namespace of the authorizer's metrics when
// METRICS_NAMESPACE is unset: the settings' default (main_test.go keeps
// them equal).
const metricsNamespace = "idemkit"

// metrics returns the recorder of the authorizer's metrics, writing to w
// under the namespace METRICS_NAMESPACE names (getenv), metricsNamespace
// when it is unset.
func metrics(w io.Writer, getenv func(string) string) *emf.Recorder {
	ns := getenv(envMetricsNamespace)
	if ns == "" {
		ns = metricsNamespace
	}
	return emf.New(w, ns)
}

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
	h := &authfn.Handler{Keys: &apikeys.DynamoKeys{Client: client, Table: table}, Logger: logger, Metrics: metrics(os.Stdout, boot.Getenv)}
	boot.Trace("wiring")
	lambda.Start(h.Handle)
}
