package tables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit"
)

// API is the subset of *dynamodb.Client used to create tables.
type API interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// Result reports what a local creation achieved beyond the table itself.
type Result struct {
	// TableName is the created table's name.
	TableName string
	// TTL is true when the definition has a TTL attribute and the server
	// accepted UpdateTimeToLive. Note that no emulator actually deletes
	// expired items.
	TTL bool
	// TTLError is the server's answer when UpdateTimeToLive was rejected as
	// unsupported (dynalite: UnknownOperationException); nil otherwise.
	TTLError error
	// StreamARN is the table's latest stream ARN, "" when the definition has
	// no stream or the server does not report one.
	StreamARN string
}

var (
	loadOnce sync.Once
	loadDefs map[string]Def
	loadErr  error
)

// Embedded returns the definitions of the embedded template.yaml
// (idemkit.Template), parsed once.
func Embedded() (map[string]Def, error) {
	loadOnce.Do(func() { loadDefs, loadErr = Defs(idemkit.Template) })
	return loadDefs, loadErr
}

// EmbeddedWithParameters returns the table definitions of the embedded
// template.yaml read with params in place of those parameters' defaults
// (DefsWithParameters).
func EmbeddedWithParameters(params map[string]string) (map[string]Def, error) {
	return DefsWithParameters(idemkit.Template, DefaultRegion, params)
}

// Create creates the table of resource logicalID of the embedded
// template.yaml under the name tableName, waits until it is ACTIVE and
// applies its TTL specification. An emulator that does not implement
// UpdateTimeToLive (dynalite) is not an error; use CreateDef to learn whether
// TTL was applied.
func Create(ctx context.Context, client API, logicalID, tableName string) error {
	defs, err := Embedded()
	if err != nil {
		return err
	}
	d, ok := defs[logicalID]
	if !ok {
		return fmt.Errorf("tables: template.yaml has no DynamoDB resource %q", logicalID)
	}
	_, err = CreateDef(ctx, client, d, tableName)
	return err
}

// CreateAll creates every DynamoDB resource of the embedded template.yaml,
// naming each prefix+logicalID, and waits until all are ACTIVE. It returns
// logicalID -> table name.
func CreateAll(ctx context.Context, client API, prefix string) (map[string]string, error) {
	defs, err := Embedded()
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(defs))
	for id := range defs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	names := make(map[string]string, len(ids))
	for _, id := range ids {
		name := prefix + id
		if _, err := CreateDef(ctx, client, defs[id], name); err != nil {
			return names, err
		}
		names[id] = name
	}
	return names, nil
}

// CreateDef creates the table d under tableName, waits until it is ACTIVE
// and applies TTL and point-in-time recovery (where the endpoint implements
// them). Creating a table that already exists is an error.
func CreateDef(ctx context.Context, client API, d Def, tableName string) (Result, error) {
	res := Result{TableName: tableName}
	if _, err := client.CreateTable(ctx, d.CreateTableInput(tableName)); err != nil {
		return res, fmt.Errorf("tables: create %s (%s): %w", tableName, d.LogicalID, err)
	}
	desc, err := WaitActive(ctx, client, tableName)
	if err != nil {
		return res, err
	}
	if desc.LatestStreamArn != nil {
		res.StreamARN = *desc.LatestStreamArn
	}
	if d.TTLAttribute != "" {
		_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(tableName),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(d.TTLAttribute),
				Enabled:       aws.Bool(true),
			},
		})
		switch {
		case err == nil:
			res.TTL = true
		case IsUnsupported(err):
			res.TTLError = err
		default:
			return res, fmt.Errorf("tables: enable TTL on %s: %w", tableName, err)
		}
	}
	if pc, ok := client.(pitrAPI); ok && d.PointInTimeRecovery {
		_, err := pc.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
			TableName:                        aws.String(tableName),
			PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)},
		})
		if err != nil && !IsUnsupported(err) {
			return res, fmt.Errorf("tables: enable point-in-time recovery on %s: %w", tableName, err)
		}
	}
	return res, nil
}

// pitrAPI is the call CreateDef makes, when the client has it, to enable
// point-in-time recovery as the template does (an endpoint that does not
// implement it, DynamoDB Local or dynalite, is not an error), so that
// Check finds a table it created like the template.
type pitrAPI interface {
	UpdateContinuousBackups(context.Context, *dynamodb.UpdateContinuousBackupsInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error)
}

// WaitActive polls DescribeTable until the table and all its indexes are
// ACTIVE, or ctx ends. It gives up after two minutes.
func WaitActive(ctx context.Context, client API, tableName string) (*types.TableDescription, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	delay := 20 * time.Millisecond
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tableName)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			return nil, fmt.Errorf("tables: describe %s: %w", tableName, err)
		}
		if err == nil && active(out.Table) {
			return out.Table, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("tables: waiting for %s to become ACTIVE: %w", tableName, ctx.Err())
		case <-time.After(delay):
		}
		if delay < time.Second {
			delay *= 2
		}
	}
}

func active(t *types.TableDescription) bool {
	if t == nil || t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// IsUnsupported reports whether err is a server's "this operation is not
// implemented" answer (dynalite: UnknownOperationException; moto:
// NotImplemented / NotYetImplemented).
func IsUnsupported(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "UnknownOperationException", "UnknownOperation", "NotImplemented",
		"NotYetImplemented", "NotImplementedException", "UnsupportedOperation",
		"UnsupportedOperationException":
		return true
	}
	return false
}

// DefaultPrefix names local tables: prefix + logical ID
// ("idemkit-RunsTable"), the default of `idemkit tables create --prefix`
// and of `idemkit dev --table-prefix`.
const DefaultPrefix = "idemkit-"

// Ensure creates the DynamoDB resources of the embedded template.yaml whose
// logical IDs are in only (all of them when only is empty), naming each
// prefix+logicalID; a table that already exists is kept (and waited for
// until ACTIVE). It returns logicalID -> table name for every table created
// or kept, also on error.
func Ensure(ctx context.Context, client API, prefix string, only []string) (map[string]string, error) {
	defs, err := Embedded()
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	ids := make([]string, 0, len(defs))
	for id := range defs {
		if len(only) == 0 || slices.Contains(only, id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		name := prefix + id
		if _, err := CreateDef(ctx, client, defs[id], name); err != nil {
			var inUse *types.ResourceInUseException
			if !errors.As(err, &inUse) {
				return names, err
			}
			if _, err := WaitActive(ctx, client, name); err != nil {
				return names, err
			}
		}
		names[id] = name
	}
	return names, nil
}

// StreamARN returns the latest stream ARN of a table; a table without a
// stream is an error.
func StreamARN(ctx context.Context, client API, table string) (string, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", err
	}
	if out.Table.LatestStreamArn == nil {
		return "", fmt.Errorf("table %s has no stream", table)
	}
	return *out.Table.LatestStreamArn, nil
}
