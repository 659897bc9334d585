package tables_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/tables"
)

// asTemplate is the DescribeTable answer of a table deployed as d (keys,
// indexes ACTIVE, stream, deletion protection), ACTIVE, in us-east-1.
func asTemplate(d tables.Def, name string) *types.TableDescription {
	t := &types.TableDescription{
		TableName:            aws.String(name),
		TableArn:             aws.String("arn:aws:dynamodb:us-east-1:123456789012:table/" + name),
		TableStatus:          types.TableStatusActive,
		AttributeDefinitions: d.AttributeDefinitions,
		KeySchema:            d.KeySchema,
	}
	if d.DeletionProtection {
		t.DeletionProtectionEnabled = aws.Bool(true)
	}
	if d.StreamViewType != "" {
		t.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: d.StreamViewType}
	}
	for _, g := range d.GlobalSecondaryIndexes {
		t.GlobalSecondaryIndexes = append(t.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{
			IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection, IndexStatus: types.IndexStatusActive})
	}
	return t
}

// RED_TEAM 487: a table that is not usable (being created or deleted, its
// KMS key inaccessible, archived) was reported ok: Check never read
// TableStatus. UPDATING is usable and is no difference.
func TestCheckTableStatus(t *testing.T) {
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	d := defs["IdempotencyTable"]
	for _, tc := range []struct {
		status types.TableStatus
		want   string // the one difference, a prefix; "" none
	}{
		{types.TableStatusActive, ""},
		{types.TableStatusUpdating, ""},
		{types.TableStatusCreating, "table status: CREATING, not ACTIVE; check again once it is ACTIVE"},
		{types.TableStatusDeleting, "table status: DELETING, not ACTIVE; it is being deleted"},
		{types.TableStatusInaccessibleEncryptionCredentials, "table status: INACCESSIBLE_ENCRYPTION_CREDENTIALS, not ACTIVE; its KMS key cannot be used"},
		{types.TableStatusArchiving, "table status: ARCHIVING, not ACTIVE; it is being archived"},
		{types.TableStatusArchived, "table status: ARCHIVED, not ACTIVE; it was archived"},
		{types.TableStatusReplicationNotAuthorized, "table status: REPLICATION_NOT_AUTHORIZED, not ACTIVE; see why in aws dynamodb describe-table"},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			table := asTemplate(d, "orders-idem")
			table.TableStatus = tc.status
			r, err := tables.Check(context.Background(), describeOnly{table}, d, "orders-idem")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && len(r.Differences) != 0:
				t.Errorf("differences %q, want none", r.Differences)
			case tc.want != "" && (len(r.Differences) != 1 || !strings.HasPrefix(r.Differences[0], tc.want)):
				t.Errorf("differences %q, want one beginning %q", r.Differences, tc.want)
			}
		})
	}
}

// RED_TEAM 488: a template index the deployed table has, but still being
// created (backfilling: queries of it are refused) or being deleted, was
// reported ok: Check compared its keys and projection, never its
// IndexStatus. UPDATING is usable and is no difference.
func TestCheckIndexStatus(t *testing.T) {
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	d := defs["RunsTable"]
	for _, tc := range []struct {
		status types.IndexStatus
		want   []string
	}{
		{types.IndexStatusActive, nil},
		{types.IndexStatusUpdating, nil},
		{types.IndexStatusCreating, []string{"global secondary index byLive: CREATING, not ACTIVE (backfilling: DynamoDB refuses queries of it); check again once it is ACTIVE"}},
		{types.IndexStatusDeleting, []string{"global secondary index byLive: DELETING, not ACTIVE (queries of it fail); once it is gone, create it again as the template gives it"}},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			table := asTemplate(d, "orders-runs")
			for i := range table.GlobalSecondaryIndexes {
				if aws.ToString(table.GlobalSecondaryIndexes[i].IndexName) == "byLive" {
					table.GlobalSecondaryIndexes[i].IndexStatus = tc.status
					table.GlobalSecondaryIndexes[i].Backfilling = aws.Bool(tc.status == types.IndexStatusCreating)
				}
			}
			r, err := tables.Check(context.Background(), describeOnly{table}, d, "orders-runs")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Differences, tc.want) {
				t.Errorf("differences %q, want %q", r.Differences, tc.want)
			}
		})
	}
}

// RED_TEAM 489: the effects table of a stack read as
// EffectsConsistency=STRONG (MRSC) was compared without its multi-region
// consistency: a deployed EVENTUAL (MREC) table differed only in its TTL
// ("template none, deployed expiresAt"), which invites turning TTL off
// rather than saying the table is not the strongly consistent one the
// stack was read as; a STRONG table read with the defaults likewise.
func TestCheckMultiRegionConsistency(t *testing.T) {
	strong, err := tables.EmbeddedWithParameters(map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "us-east-2,us-west-2", "EffectsConsistency": "STRONG"})
	if err != nil {
		t.Fatal(err)
	}
	eventual, err := tables.EmbeddedWithParameters(map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "us-east-2,us-west-2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strong["EffectsTable"].MultiRegionConsistency; got != types.MultiRegionConsistencyStrong {
		t.Fatalf("STRONG stack: effects table consistency %q", got)
	}
	if got := eventual["EffectsTable"].MultiRegionConsistency; got != "" {
		t.Fatalf("EVENTUAL stack: effects table consistency %q, want none given", got)
	}
	deployed := func(d tables.Def, mrc types.MultiRegionConsistency) *types.TableDescription {
		table := asTemplate(d, "orders-effects")
		table.MultiRegionConsistency = mrc
		table.GlobalTableVersion = aws.String("2019.11.21")
		for _, r := range []string{"us-east-2", "us-west-2"} {
			table.Replicas = append(table.Replicas, types.ReplicaDescription{RegionName: aws.String(r), ReplicaStatus: types.ReplicaStatusActive})
		}
		return table
	}
	const mismatch = "multi-region consistency: "
	for _, tc := range []struct {
		name  string
		def   tables.Def
		table *types.TableDescription
		want  string // a difference beginning so, "" none of consistency
	}{
		{"StrongAsStrong", strong["EffectsTable"], deployed(strong["EffectsTable"], types.MultiRegionConsistencyStrong), ""},
		{"EventualAsEventual", eventual["EffectsTable"], deployed(eventual["EffectsTable"], types.MultiRegionConsistencyEventual), ""},
		{"EventualWithoutTheField", eventual["EffectsTable"], deployed(eventual["EffectsTable"], ""), ""},
		{"StrongDeployedEventual", strong["EffectsTable"], deployed(strong["EffectsTable"], types.MultiRegionConsistencyEventual), mismatch + "template STRONG, deployed EVENTUAL"},
		{"StrongDeployedWithoutTheField", strong["EffectsTable"], deployed(strong["EffectsTable"], ""), mismatch + "template STRONG, deployed EVENTUAL"},
		{"EventualDeployedStrong", eventual["EffectsTable"], deployed(eventual["EffectsTable"], types.MultiRegionConsistencyStrong), mismatch + "template EVENTUAL, deployed STRONG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tables.Check(context.Background(), describeOnly{tc.table}, tc.def, "orders-effects")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range r.Differences {
				if strings.HasPrefix(d, mismatch) {
					got = append(got, d)
				}
			}
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("differences %q, want none of consistency", r.Differences)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("differences %q, want one beginning %q", r.Differences, tc.want)
			}
		})
	}
}
