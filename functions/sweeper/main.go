// Command sweeper is the scheduled retention-sweeper Lambda function
// (bootstrap for provided.al2023): wiring only; the handler is
// functions/sweeper/sweepfn. template.yaml deploys it only where a table has
// no TTL: the effects table when MRSC (EffectsConsistency=STRONG), the
// idempotency table in a fenced-effects home stack.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
)

func main() {
	s := kit.Boot("sweeper")
	h, err := sweepfn.NewFromEnv(s.Env, s.Client, s.Metrics, s.Logger)
	s.Must("configuration", err)
	s.Wired()
	lambda.Start(h.Handle)
}
