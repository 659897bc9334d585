// Command executor is the runs-stream Lambda function (bootstrap for
// provided.al2023): wiring only; the handler is functions/executor/execfn.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/kit"
)

func main() {
	env, client, metrics, logger := kit.Boot("executor")
	k, err := kit.NewKit(env, client, kit.Parts{Runs: true, Ledger: true}, logger, metrics)
	kit.Must(logger, "executor", "wiring", err)
	// The stream delivers a failing run 1 + STREAM_MAX_RETRIES times; the
	// last try ends the run failed rather than stranding it "running".
	x := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: logger, MaxAttempts: env.StreamMaxRetries + 1, StaleAfter: env.RunStale}
	lambda.Start(x.HandleInvoke)
}
