package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// noTableError: a command that reaches AWS (no --endpoint) was given no
// table, neither by --table nor by its environment variable env.
type noTableError struct{ env string }

func (e noTableError) Error() string {
	return "--table (or $" + e.env + ") is required without --endpoint"
}

// tableNameRule is what tableNameOK accepts, as a refusal says it.
const tableNameRule = "want a DynamoDB table name, 3..255 of letters, digits, '_', '-' and '.', or a table's ARN (arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME)"

// tableNameOK reports whether n is a TableName DynamoDB accepts: a name,
// 3..255 of a-z A-Z 0-9 _ - and '.', or a table's ARN,
// arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME, with a 12-digit
// account and NAME such a name.
func tableNameOK(n string) bool {
	if rest, ok := strings.CutPrefix(n, "arn:"); ok {
		f := strings.SplitN(rest, ":", 5)
		if len(f) != 5 || !arnPartOK(f[0]) || f[1] != "dynamodb" || !arnPartOK(f[2]) || len(f[3]) != 12 || strings.Trim(f[3], "0123456789") != "" {
			return false
		}
		name, ok := strings.CutPrefix(f[4], "table/")
		return ok && plainTableNameOK(name)
	}
	return plainTableNameOK(n)
}

// plainTableNameOK reports whether n is a table's name (not its ARN):
// 3..255 of a-z A-Z 0-9 _ - and '.'.
func plainTableNameOK(n string) bool {
	if len(n) < 3 || len(n) > 255 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// arnPartOK reports whether p can be an ARN's partition or region: one or
// more of a-z 0-9 and '-'.
func arnPartOK(p string) bool {
	return p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// badTableError: the table name a flag or variable gave is none DynamoDB
// accepts (tableNameOK); what names its source ("--table", "$EFFECTS_TABLE").
type badTableError struct{ what, name string }

func (e badTableError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.what, e.name, tableNameRule)
}

// isTableUsage reports whether err, from tableTarget, is a usage error: no
// table named, or a malformed name.
func isTableUsage(err error) bool {
	return errors.As(err, new(noTableError)) || errors.As(err, new(badTableError))
}

// tableTarget resolves the client and table name a command reaches from
// its --endpoint, --table and --region values. The table defaults to $env,
// then, with an endpoint, to DefaultTablePrefix+logicalID. With an endpoint
// the client is the emulator client for it (in region, when set); without
// one it is AWS's, from the default configuration (region, when set,
// replacing the configured region), and a missing table is a noTableError.
// A name DynamoDB would refuse is a badTableError naming flag (the flag
// that gave it, "--table") or $env, before any client is made.
func tableTarget(ctx context.Context, endpoint, table, region, flag, env, logicalID string) (*dynamodb.Client, string, error) {
	what := flag
	if table == "" {
		table, what = os.Getenv(env), "$"+env
	}
	if table != "" && !tableNameOK(table) {
		return nil, "", badTableError{what, table}
	}
	if endpoint != "" {
		if table == "" {
			table = DefaultTablePrefix + logicalID
		}
		return endpointClient(endpoint, func(o *dynamodb.Options) {
			if region != "" {
				o.Region = region
			}
		}), table, nil
	}
	if table == "" {
		return nil, "", noTableError{env}
	}
	c, err := awsClient(ctx)
	if err != nil {
		return nil, "", err
	}
	if region != "" {
		c = dynamodb.New(c.Options(), func(o *dynamodb.Options) { o.Region = region })
	}
	return c, table, nil
}
