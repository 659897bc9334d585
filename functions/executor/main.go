// Command executor is the runs-stream Lambda function (bootstrap for
// provided.al2023): wiring only; the handler is functions/executor/execfn.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/internal/emf"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	env, err := host.LoadEnv(os.Getenv)
	if err != nil {
		logger.Error("executor: configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	client, err := host.NewDynamoClient(context.Background(), env.DynamoDBEndpoint)
	if err != nil {
		logger.Error("executor: aws", slog.String("error", err.Error()))
		os.Exit(1)
	}
	k, err := kit.NewKit(env, client, kit.Parts{Runs: true, Ledger: true}, logger, emf.New(os.Stdout, env.MetricsNamespace))
	if err != nil {
		logger.Error("executor: wiring", slog.String("error", err.Error()))
		os.Exit(1)
	}
	// The stream delivers a failing run 1 + STREAM_MAX_RETRIES times; the
	// last try ends the run failed rather than stranding it "running".
	x := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: logger, MaxAttempts: env.StreamMaxRetries + 1}
	lambda.Start(x.HandleLambda)
}
