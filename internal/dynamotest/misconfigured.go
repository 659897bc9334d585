package dynamotest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Misconfigured is one way a store's table can be wrong, for the stores'
// misconfigured-table tests: Name is the subtest's name, Table returns the
// name of the table to point the store at.
type Misconfigured struct {
	Name  string
	Table func(t testing.TB) string
}

// Misconfigured lists the wrong tables a store can meet on e:
// "MissingTable", a name no table has, and "WrongKeySchema", a table
// created (when Table is called) keyed on "id" alone, which no store of
// the module writes, and deleted when the test ends.
func (e *Emulator) Misconfigured() []Misconfigured {
	return []Misconfigured{
		{"MissingTable", func(testing.TB) string { return uniqueName("NoSuchTable") }},
		{"WrongKeySchema", e.wrongKeyTable},
	}
}

// wrongKeyTable creates a table keyed on "id" and deletes it when the test
// ends.
func (e *Emulator) wrongKeyTable(t testing.TB) string {
	t.Helper()
	c := e.Client()
	name := uniqueName("WrongKeys")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest}); err != nil {
		t.Fatalf("dynamotest: %s: %v", e.Kind, err)
	}
	deleteAtEnd(t, c, name)
	return name
}
