// Command authorizer is the HTTP API Lambda authorizer function (bootstrap
// for provided.al2023): wiring only; the handler is
// functions/authorizer/authfn.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
)

func main() {
	env, client, _, logger := kit.Boot("authorizer", settings.EnvAPIKeysTable)
	h := &authfn.Handler{Keys: &apikeys.DynamoKeys{Client: client, Table: env.APIKeysTable}, Logger: logger}
	lambda.Start(h.Handle)
}
