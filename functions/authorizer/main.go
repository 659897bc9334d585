// Command authorizer is the HTTP API Lambda authorizer function (bootstrap
// for provided.al2023): wiring only; the handler is
// functions/authorizer/authfn.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host"
)

func main() {
	env, client, _, logger := host.Boot("authorizer", host.EnvAPIKeysTable)
	h := &authfn.Handler{Keys: &host.DynamoKeys{Client: client, Table: env.APIKeysTable}, Logger: logger}
	lambda.Start(h.Handle)
}
