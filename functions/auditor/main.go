// Command auditor is the effects/idempotency-streams Lambda function
// (bootstrap for provided.al2023): wiring only; the handler is
// functions/auditor/auditfn. CROSS_REGION (reconciled-records or
// fenced-effects) turns on the cross-region conflict audit (auditfn.NewFromEnv);
// under reconciled-records a Layer-1 conflict's winner is written back into
// this region's IDEMPOTENCY_TABLE replica (auditfn.TableRestorer).
package main

import (
	"context"
	"github.com/idemkit/idemkit/idem/idemenv"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emf"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	a, err := auditfn.NewFromEnv(kit.Getenv, emf.New(os.Stdout, kit.Getenv("METRICS_NAMESPACE")), logger)
	if err != nil {
		logger.Error("auditor: configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	if table := kit.Getenv(idemenv.Table); a.Conflicts != nil && table != "" && kit.Getenv(settings.EnvCrossRegion) == settings.CrossRegionReconciled {
		db, err := kit.NewDynamoClient(context.Background(), kit.Getenv(settings.EnvDynamoDBEndpoint))
		if err != nil {
			logger.Error("auditor: DynamoDB client", slog.String("error", err.Error()))
			os.Exit(1)
		}
		a.Restore = auditfn.TableRestorer{Client: db, Table: table}
	}
	lambda.Start(a.HandleLambda)
}
