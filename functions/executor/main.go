// Command executor is the runs-stream Lambda function (bootstrap for
// provided.al2023): wiring only; the handler is functions/executor/execfn.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/kit"
)

func main() {
	s := kit.Boot("executor")
	k := s.Kit(kit.Parts{Runs: true, Ledger: true})
	// The stream delivers a failing run 1 + STREAM_MAX_RETRIES times; the
	// last try ends the run failed rather than stranding it "running", and
	// the schedule's stale-run pass drives a run whose delivery was lost.
	// Each start's lag behind its creation is an EMF metric.
	x := &execfn.Executor{Runs: k.Runs, Webhook: k.Webhook, Logger: s.Logger, MaxAttempts: s.Env.StreamMaxRetries + 1, StaleAfter: s.Env.RunStale, Metrics: s.Metrics}
	s.Wired()
	lambda.Start(x.HandleInvoke)
}
