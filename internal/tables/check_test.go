package tables_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// TestCheckFindsWhatDiffers: on the engines with streams (DynamoDB Local,
// moto), a table created from template.yaml's definition matches it, and
// Check names each difference of a table created otherwise: no table of
// that name (a renamed table), no TTL, no stream, another key schema, a
// missing index. What an engine cannot report (point-in-time recovery on
// DynamoDB Local) is listed as unchecked, never as a match or a
// difference.
func TestCheckFindsWhatDiffers(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := e.Client()
		embedded, err := tables.Embedded()
		if err != nil {
			t.Fatal(err)
		}
		// Local tables are made without deletion protection, so that they
		// can be deleted; doctor compares it on AWS only (RED_TEAM 515).
		defs := map[string]tables.Def{}
		for id, d := range embedded {
			d.DeletionProtection = false
			defs[id] = d
		}
		create := func(t *testing.T, d tables.Def) string {
			var b [4]byte
			_, _ = rand.Read(b[:])
			name := "check-" + hex.EncodeToString(b[:])
			if _, err := tables.CreateDef(ctx, c, d, name); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			})
			return name
		}
		idem, effects := defs["IdempotencyTable"], defs["EffectsTable"]
		noTTL, noStream, otherKeys, noIndex := idem, idem, idem, effects
		noTTL.TTLAttribute = ""
		otherTTL := idem
		otherTTL.TTLAttribute = "ttl"
		noStream.StreamViewType = ""
		otherKeys.AttributeDefinitions = []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}}
		otherKeys.KeySchema = []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}}
		noIndex.GlobalSecondaryIndexes = nil
		noIndex.AttributeDefinitions = noIndex.AttributeDefinitions[:2]
		for _, tc := range []struct {
			name    string
			def     tables.Def // what the table is created from ("" name: not created)
			missing bool
			want    []string // a substring of each expected difference
		}{
			{name: "AsTheTemplate", def: idem},
			{name: "EffectsAsTheTemplate", def: effects},
			{name: "Renamed", missing: true},
			{name: "NoTTL", def: noTTL, want: []string{"TTL: disabled (template: attribute expiresAt"}},
			{name: "TTLOnAnotherAttribute", def: otherTTL, want: []string{"TTL: template expiresAt, deployed ttl"}},
			{name: "NoStream", def: noStream, want: []string{"stream: missing (template NEW_AND_OLD_IMAGES"}},
			{name: "OtherKeys", def: otherKeys, want: []string{"key schema: template pk S (HASH), deployed id S (HASH)"}},
			{name: "NoIndex", def: noIndex, want: []string{"global secondary index byRun: missing"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				against := idem
				name := "renamed-" + tc.name
				if !tc.missing {
					name = create(t, tc.def)
					against = defs[tc.def.LogicalID]
				}
				r, err := tables.Check(ctx, c, against, name)
				if err != nil {
					t.Fatal(err)
				}
				if r.Missing != tc.missing {
					t.Fatalf("Missing = %v, want %v", r.Missing, tc.missing)
				}
				if len(r.Differences) != len(tc.want) {
					t.Fatalf("differences %q, want %d like %q", r.Differences, len(tc.want), tc.want)
				}
				for i, w := range tc.want {
					if !strings.Contains(r.Differences[i], w) {
						t.Errorf("difference %q, want it to say %q", r.Differences[i], w)
					}
				}
				if r.OK() != (!tc.missing && len(tc.want) == 0) {
					t.Errorf("OK() = %v for %+v", r.OK(), r)
				}
				if e.Kind == dynamotest.Moto && !tc.missing && len(r.Unchecked) != 0 {
					t.Errorf("moto reports everything; unchecked = %q", r.Unchecked)
				}
				if e.Kind == dynamotest.DynamoDBLocal && !tc.missing &&
					!(len(r.Unchecked) == 1 && strings.HasPrefix(r.Unchecked[0], "point-in-time recovery")) {
					t.Errorf("DynamoDB Local cannot report point-in-time recovery; unchecked = %q", r.Unchecked)
				}
			})
		}
		if e.Kind == dynamotest.Moto { // the engine that reports point-in-time recovery
			t.Run("NoPointInTimeRecovery", func(t *testing.T) {
				name := create(t, idem)
				if _, err := c.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{TableName: aws.String(name),
					PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(false)}}); err != nil {
					t.Fatal(err)
				}
				r, err := tables.Check(ctx, c, idem, name)
				if err != nil || len(r.Differences) != 1 || !strings.HasPrefix(r.Differences[0], "point-in-time recovery: disabled") {
					t.Fatalf("%+v %v; want point-in-time recovery disabled", r, err)
				}
			})
		}
	})
}
