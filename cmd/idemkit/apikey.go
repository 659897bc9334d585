package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host"
	"github.com/idemkit/idemkit/internal/emulator"
)

func runAPIKeyCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tenant := fs.String("tenant", "", "tenant the key authenticates (tenantId grammar); required")
	endpoint := fs.String("endpoint", "", "DynamoDB endpoint URL (emulator/LocalStack); default: AWS, with the default credential chain")
	table := fs.String("table", "", "api-keys table; default $"+host.EnvAPIKeysTable+", or "+DefaultTablePrefix+"ApiKeysTable with --endpoint")
	region := fs.String("region", "", "region; default the AWS configuration's ("+emulator.Region+" with --endpoint)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *tenant == "" || !host.ValidTenant(*tenant) || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "idemkit apikey create: --tenant T is required and must match ^(anon:)?[A-Za-z0-9._~-]{1,128}$")
		return 2
	}
	if *table == "" {
		*table = os.Getenv(host.EnvAPIKeysTable)
	}
	var c *dynamodb.Client
	if *endpoint != "" {
		if *table == "" {
			*table = DefaultTablePrefix + "ApiKeysTable"
		}
		c = emulator.Client(*endpoint, func(o *dynamodb.Options) {
			if *region != "" {
				o.Region = *region
			}
		})
	} else {
		if *table == "" {
			fmt.Fprintln(stderr, "idemkit apikey create: --table (or $"+host.EnvAPIKeysTable+") is required without --endpoint")
			return 2
		}
		var err error
		if c, err = host.NewDynamoClient(ctx, ""); err != nil {
			fmt.Fprintf(stderr, "idemkit apikey create: %v\n", err)
			return 1
		}
		if *region != "" {
			c = dynamodb.New(c.Options(), func(o *dynamodb.Options) { o.Region = *region })
		}
	}
	key := host.NewAPIKey()
	if err := (&host.DynamoKeys{Client: c, Table: *table}).PutKey(ctx, key, *tenant); err != nil {
		fmt.Fprintf(stderr, "idemkit apikey create: %v\n", err)
		return 1
	}
	// The key is shown once; only its SHA-256 hash is stored.
	fmt.Fprintln(stdout, key)
	return 0
}
