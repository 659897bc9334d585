// Command api is the api Lambda function (bootstrap for provided.al2023):
// wiring only; the handler is functions/api/apifn.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/internal/emf"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	env, err := host.LoadEnv(os.Getenv)
	if err != nil {
		logger.Error("api: configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	client, err := host.NewDynamoClient(context.Background(), env.DynamoDBEndpoint)
	if err != nil {
		logger.Error("api: aws", slog.String("error", err.Error()))
		os.Exit(1)
	}
	k, err := kit.NewKit(env, client, kit.Parts{Runs: true, Guard: true, Ledger: true}, logger, emf.New(os.Stdout, env.MetricsNamespace))
	if err != nil {
		logger.Error("api: wiring", slog.String("error", err.Error()))
		os.Exit(1)
	}
	h, err := apifn.New(apifn.Config{Runs: k.Runs, Guard: k.Guard, Ledger: k.Ledger, Webhook: env.Webhook,
		CrossRegion: env.CrossRegion, ReplicationLagBoundMs: env.ReplicationLagBoundMs, Logger: logger})
	if err != nil {
		logger.Error("api: handler", slog.String("error", err.Error()))
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
