// Command auditor is the effects/idempotency-streams Lambda function
// (bootstrap for provided.al2023): wiring only; the handler is
// functions/auditor/auditfn.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/internal/emf"
)

func main() {
	ns := os.Getenv("METRICS_NAMESPACE")
	a := &auditfn.Auditor{Metrics: emf.New(os.Stdout, ns), Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	lambda.Start(a.HandleLambda)
}
