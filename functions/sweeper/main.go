// Command sweeper is the scheduled retention-sweeper Lambda function
// (bootstrap for provided.al2023): wiring only; the handler is
// functions/sweeper/sweepfn. template.yaml deploys it only when the effects
// table is MRSC (EffectsConsistency=STRONG: no TTL there).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/host"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/internal/emf"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	env, err := host.LoadEnv(os.Getenv)
	if err != nil {
		logger.Error("sweeper: configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	client, err := host.NewDynamoClient(context.Background(), env.DynamoDBEndpoint)
	if err != nil {
		logger.Error("sweeper: aws", slog.String("error", err.Error()))
		os.Exit(1)
	}
	h, err := sweepfn.NewFromEnv(env, client, emf.New(os.Stdout, env.MetricsNamespace), logger)
	if err != nil {
		logger.Error("sweeper: configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
