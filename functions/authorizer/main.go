// Command authorizer is the HTTP API Lambda authorizer function (bootstrap
// for provided.al2023): wiring only; the handler is
// functions/authorizer/authz.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/authorizer/authz"
	"github.com/idemkit/idemkit/functions/host"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	env, err := host.LoadEnv(os.Getenv)
	if err == nil {
		err = env.Require(host.EnvAPIKeysTable)
	}
	if err != nil {
		logger.Error("authorizer: configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	client, err := host.NewDynamoClient(context.Background(), env.DynamoDBEndpoint)
	if err != nil {
		logger.Error("authorizer: aws", slog.String("error", err.Error()))
		os.Exit(1)
	}
	h := &authz.Handler{Keys: &host.DynamoKeys{Client: client, Table: env.APIKeysTable}, Logger: logger}
	lambda.Start(h.Handle)
}
