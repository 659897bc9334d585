package devstack

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/internal/tables"
)

// devDefaults are `idemkit dev`'s own defaults, beneath the environment,
// stated in the settings table (settings.Setting.Dev): a short effect lease
// (a crashed attempt is retried within seconds) and fewer stream retries.
var devDefaults = hostsettings.DevDefaults()

// devSettings reads `idemkit dev`'s settings.Env the one way the functions do
// (settings.LoadEnv): the values dev decides itself (own: the tables it created,
// the endpoint it reaches), over the setting flags, over the environment,
// over devDefaults. A setting the functions only warn of (Env.Warnings: they
// keep serving a stack upgraded with it) stops dev at start: a new start at
// a terminal is the place to say it (RED_TEAM 374).
func devSettings(own, flags map[string]string, getenv func(string) string) (hostsettings.Env, error) {
	env, err := hostsettings.LoadEnv(hostsettings.Layered(hostsettings.Values(own), hostsettings.Values(flags), getenv, hostsettings.Values(devDefaults)))
	if err == nil && len(env.Warnings) > 0 {
		err = fmt.Errorf("%w: %s", hostsettings.ErrConfig, strings.Join(env.Warnings, "; "))
	}
	return env, err
}

// devTables creates the tables of template.yaml that are missing at
// endpoint (names by logical ID) and reads the settings over them
// (devSettings), with transactions off on an engine without them.
func devTables(ctx context.Context, client *dynamodb.Client, o Options, endpoint string) (map[string]string, hostsettings.Env, error) {
	names, err := tables.Ensure(ctx, client, o.TablePrefix, nil)
	if err != nil {
		return nil, hostsettings.Env{}, err
	}

	env, err := devSettings(devOwn(names, endpoint), o.Settings, o.Getenv)
	if err != nil {
		return nil, hostsettings.Env{}, err
	}
	// An engine without transactions (dynalite) makes createRun use a
	// conditional PutItem whatever RUNS_TRANSACTIONAL says.
	env.Transactional = env.Transactional && supportsTransactions(ctx, client, env.RunsTable)
	return names, env, nil
}

// checkSettings reports a bad setting before anything is started (the
// tables stand in for the ones dev creates).
func checkSettings(prefix string, settings map[string]string, getenv func(string) string) error {
	placeholders := map[string]string{}
	for _, id := range []string{"IdempotencyTable", "RunsTable", "EffectsTable", "ApiKeysTable", "FenceTable"} {
		placeholders[id] = prefix + id
	}
	own := devOwn(placeholders, "http://127.0.0.1")
	_, err := devSettings(own, settings, getenv)
	return err
}

// devOwn are the settings `idemkit dev` decides itself, over any
// environment: the tables it created (names by template.yaml logical ID)
// and the endpoint it reaches.
func devOwn(names map[string]string, endpoint string) map[string]string {
	return map[string]string{
		idemenv.Table:                    names["IdempotencyTable"],
		hostsettings.EnvRunsTable:        names["RunsTable"],
		hostsettings.EnvEffectsTable:     names["EffectsTable"],
		hostsettings.EnvAPIKeysTable:     names["ApiKeysTable"],
		hostsettings.EnvFenceTable:       names["FenceTable"],
		hostsettings.EnvDynamoDBEndpoint: endpoint,
	}
}

// supportsTransactions probes TransactWriteItems with one condition check on
// a key that never exists; an endpoint without transactions (dynalite) makes
// createRun fall back to a conditional PutItem.
func supportsTransactions(ctx context.Context, c *dynamodb.Client, table string) bool {
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("pk"))).Build()
	if err != nil {
		return false
	}
	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{
		ConditionCheck: &types.ConditionCheck{
			TableName:                aws.String(table),
			Key:                      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "probe#transactions"}},
			ConditionExpression:      cond.Condition(),
			ExpressionAttributeNames: cond.Names(),
		},
	}}})
	return err == nil || !tables.IsUnsupported(err)
}
