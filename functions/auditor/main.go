// Command auditor is the effects/idempotency-streams Lambda function
// (bootstrap for provided.al2023): wiring only; the handler is
// functions/auditor/auditfn. CROSS_REGION (reconciled-records or
// fenced-effects) turns on the cross-region conflict audit (auditfn.NewFromEnv);
// under reconciled-records a Layer-1 conflict's winner is written back into
// this region's IDEMPOTENCY_TABLE replica (auditfn.TableRestorer), and a
// completed effect record the other region's claim replaced without an
// outcome into its EFFECTS_TABLE replica (auditfn.EffectTableRestorer):
// the tables auditfn.WriteBackTables names.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emf"
)

func main() {
	// The auditor reads its few variables itself (auditfn.NewFromEnv), so
	// it begins without the settings or a client.
	s := kit.Begin("auditor")
	a, err := auditfn.NewFromEnv(s.Getenv, emf.New(os.Stdout, s.Getenv("METRICS_NAMESPACE")), s.Logger)
	s.Must("configuration", err)
	if table, effects := auditfn.WriteBackTables(s.Getenv); a.Conflicts != nil {
		if table != "" || effects != "" {
			db, err := kit.NewDynamoClient(context.Background(), s.Getenv(settings.EnvDynamoDBEndpoint))
			s.Must("DynamoDB client", err)
			if table != "" {
				a.Restore = auditfn.TableRestorer{Client: db, Table: table}
			}
			if effects != "" {
				a.RestoreEffects = auditfn.EffectTableRestorer{Client: db, Table: effects}
			}
		}
	}
	s.Wired()
	lambda.Start(a.HandleLambda)
}
