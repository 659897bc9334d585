// Command api is the api Lambda function (bootstrap for provided.al2023):
// wiring only; the handler is functions/api/apifn.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/kit"
)

func main() {
	s := kit.Boot("api")
	k := s.Kit(kit.Parts{Runs: true, Guard: true, Ledger: true})
	h, err := apifn.New(apifn.ConfigFromKit(k))
	s.Must("handler", err)
	s.Wired()
	lambda.Start(h.Handle)
}
