// Command api is the api Lambda function (bootstrap for provided.al2023):
// wiring only; the handler is functions/api/apifn.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/boot"
	"github.com/idemkit/idemkit/functions/host/kit"
)

func main() {
	env, client, metrics, logger := kit.Boot("api")
	k, err := kit.NewKit(env, client, kit.Parts{Runs: true, Guard: true, Ledger: true}, logger, metrics)
	kit.Must(logger, "api", "wiring", err)
	h, err := apifn.New(apifn.Config{Runs: k.Runs, Guard: k.Guard, Ledger: k.Ledger, Webhook: env.Webhook,
		CrossRegion: env.CrossRegion, ReplicationLagBoundMs: env.ReplicationLagBoundMs, Logger: logger})
	kit.Must(logger, "api", "handler", err)
	boot.Trace("wiring")
	lambda.Start(h.Handle)
}
