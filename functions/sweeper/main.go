// Command sweeper is the scheduled retention-sweeper Lambda function
// (bootstrap for provided.al2023): wiring only; the handler is
// functions/sweeper/sweepfn. template.yaml deploys it only when the effects
// table is MRSC (EffectsConsistency=STRONG: no TTL there).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/host/boot"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
)

func main() {
	env, client, metrics, logger := kit.Boot("sweeper")
	h, err := sweepfn.NewFromEnv(env, client, metrics, logger)
	kit.Must(logger, "sweeper", "configuration", err)
	boot.Trace("wiring")
	lambda.Start(h.Handle)
}
