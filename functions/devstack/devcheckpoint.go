package devstack

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/tables"
)

// checkpoints keep, per stream shard, the sequence number of the last
// record `idemkit dev`'s poller handled, so that a restarted dev server
// resumes there instead of re-reading every stream from its start (as
// Lambda's event source mapping does).
type checkpoints interface {
	// get returns the checkpoint of the shard, "" if it has none.
	get(ctx context.Context, stream, shard string) (string, error)
	// put records seq as the shard's checkpoint.
	put(ctx context.Context, stream, shard, seq string) error
}

// checkpointTableSuffix names the dev-only table of checkpoints: prefix +
// suffix. It is not part of template.yaml (deployed stacks use event source
// mappings, which keep their own).
const checkpointTableSuffix = "DevStreamCheckpoints"

// dynamoCheckpoints keeps checkpoints in a table of the same DynamoDB as the
// streams: they live exactly as long as the data does (an in-memory
// emulator forgets both at once; a persistent endpoint keeps both).
type dynamoCheckpoints struct {
	c     *dynamodb.Client
	table string
}

// newDynamoCheckpoints creates the checkpoint table if it is missing.
func newDynamoCheckpoints(ctx context.Context, c *dynamodb.Client, table string) (*dynamoCheckpoints, error) {
	def := tables.Def{
		LogicalID:            checkpointTableSuffix,
		Type:                 "AWS::DynamoDB::Table",
		Enabled:              true,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}
	if _, err := tables.CreateDef(ctx, c, def, table); err != nil {
		var inUse *types.ResourceInUseException
		if !errors.As(err, &inUse) {
			return nil, err
		}
		if _, err := tables.WaitActive(ctx, c, table); err != nil {
			return nil, err
		}
	}
	return &dynamoCheckpoints{c: c, table: table}, nil
}

func checkpointKey(stream, shard string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: stream + "#" + shard}}
}

func (d *dynamoCheckpoints) get(ctx context.Context, stream, shard string) (string, error) {
	out, err := d.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: checkpointKey(stream, shard), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", err
	}
	if v, ok := out.Item["seq"].(*types.AttributeValueMemberS); ok {
		return v.Value, nil
	}
	return "", nil
}

func (d *dynamoCheckpoints) put(ctx context.Context, stream, shard, seq string) error {
	item := checkpointKey(stream, shard)
	item["seq"] = &types.AttributeValueMemberS{Value: seq}
	_, err := d.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: item})
	return err
}
