package kit

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/boot"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emf"
)

// Boot is the start-up every function's main shares: a JSON logger on
// stderr, the environment (LoadEnv, then the required variables), a
// DynamoDB client and an EMF recorder on stdout (namespace
// METRICS_NAMESPACE). It never returns on failure: the error is logged
// under the function's name and the process exits 1, which Lambda reports
// as an init error.
func Boot(name string, required ...string) (settings.Env, *dynamodb.Client, *emf.Recorder, *slog.Logger) {
	boot.Trace("main")
	logger := boot.Logger()
	env, err := settings.LoadEnv(os.Getenv)
	if err == nil && len(required) > 0 {
		err = env.Require(required...)
	}
	Must(logger, name, "configuration", err)
	boot.Trace("settings")
	client, err := NewDynamoClient(context.Background(), env.DynamoDBEndpoint)
	Must(logger, name, "aws", err)
	return env, client, emf.New(os.Stdout, env.MetricsNamespace), logger
}

// Must ends the process with a logged error when err is not nil (name: the
// function, stage: what failed).
func Must(logger *slog.Logger, name, stage string, err error) { boot.Must(logger, name, stage, err) }

// Getenv reads the process environment. The wiring is the one place the
// functions read it (internal/archtest holds them to that); everything else
// is given a getenv or a settings.Env.
func Getenv(name string) string { return boot.Getenv(name) }
