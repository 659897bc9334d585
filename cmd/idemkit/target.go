package main

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/internal/emulator"
)

// noTableError: a command that reaches AWS (no --endpoint) was given no
// table, neither by --table nor by its environment variable env.
type noTableError struct{ env string }

func (e noTableError) Error() string {
	return "--table (or $" + e.env + ") is required without --endpoint"
}

// tableTarget resolves the client and table name a command reaches from
// its --endpoint, --table and --region values. The table defaults to $env,
// then, with an endpoint, to DefaultTablePrefix+logicalID. With an endpoint
// the client is the emulator client for it (in region, when set); without
// one it is AWS's, from the default configuration (region, when set,
// replacing the configured region), and a missing table is a noTableError.
func tableTarget(ctx context.Context, endpoint, table, region, env, logicalID string) (*dynamodb.Client, string, error) {
	if table == "" {
		table = os.Getenv(env)
	}
	if endpoint != "" {
		if table == "" {
			table = DefaultTablePrefix + logicalID
		}
		return emulator.Client(endpoint, func(o *dynamodb.Options) {
			if region != "" {
				o.Region = region
			}
		}), table, nil
	}
	if table == "" {
		return nil, "", noTableError{env}
	}
	c, err := kit.NewDynamoClient(ctx, "")
	if err != nil {
		return nil, "", err
	}
	if region != "" {
		c = dynamodb.New(c.Options(), func(o *dynamodb.Options) { o.Region = region })
	}
	return c, table, nil
}
