package tables

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestDifferIndexes: a template index the deployed table lacks is missing,
// one deployed with other keys or projection differs, an extra deployed
// index is no difference, and the lines keep the template's order.
func TestDifferIndexes(t *testing.T) {
	attr := map[string]types.ScalarAttributeType{"pk": types.ScalarAttributeTypeS, "run": types.ScalarAttributeTypeS}
	keys := func(names ...string) []types.KeySchemaElement {
		ks := []types.KeySchemaElement{{AttributeName: aws.String(names[0]), KeyType: types.KeyTypeHash}}
		for _, n := range names[1:] {
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(n), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	parts := func(l types.LocalSecondaryIndex) (*string, []types.KeySchemaElement, *types.Projection) {
		return l.IndexName, l.KeySchema, l.Projection
	}
	describe := func(l types.LocalSecondaryIndexDescription) (*string, []types.KeySchemaElement, *types.Projection) {
		return l.IndexName, l.KeySchema, l.Projection
	}
	template := []types.LocalSecondaryIndex{
		{IndexName: aws.String("byRun"), KeySchema: keys("pk", "run")},
		{IndexName: aws.String("same"), KeySchema: keys("pk", "run"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}},
		{IndexName: aws.String("gone"), KeySchema: keys("pk", "run")},
	}
	deployed := []types.LocalSecondaryIndexDescription{
		{IndexName: aws.String("extra"), KeySchema: keys("pk")},
		{IndexName: aws.String("same"), KeySchema: keys("pk", "run"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}},
		{IndexName: aws.String("byRun"), KeySchema: keys("pk", "run"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}},
	}
	var got []string
	differ := func(format string, a ...any) { got = append(got, fmt.Sprintf(format, a...)) }
	differIndexes(differ, "local secondary index", indexStrings(template, attr, parts), indexStrings(deployed, attr, describe))
	want := []string{
		"local secondary index byRun: template pk S (HASH), run S (RANGE), projection ALL, deployed pk S (HASH), run S (RANGE), projection KEYS_ONLY",
		"local secondary index gone: missing (template pk S (HASH), run S (RANGE), projection ALL)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("differences:\n%q\nwant\n%q", got, want)
	}
}
