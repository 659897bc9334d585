package tables_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// RED_TEAM 486: a global table's replica regions are read from the template
// (Fn::Split of ReplicaRegions, with the stack's parameters), the stack's
// own replica left out; a single-region stack has none, and a Table never.
func TestDefsReplicaRegions(t *testing.T) {
	for _, tc := range []struct {
		name         string
		params       map[string]string
		idem, effect []string
	}{
		{name: "SingleRegion"},
		{name: "Reconciled", params: map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1,eu-central-1"},
			idem: []string{"eu-west-1", "eu-central-1"}, effect: []string{"eu-west-1", "eu-central-1"}},
		{name: "FencedOneReplica", params: map[string]string{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1"},
			idem: []string{"eu-west-1"}, effect: []string{"eu-west-1"}},
		// ReplicaRegions without a multi-region posture: the template
		// replicates EffectsTable only (IdempotencyReplica1 needs
		// MultiRegion).
		{name: "EffectsOnly", params: map[string]string{"ReplicaRegions": "eu-west-1"}, effect: []string{"eu-west-1"}},
		// A ReplicaRegions region that is the region the template is read
		// in (doctor reads it in us-east-1 unless --region says otherwise)
		// is a replica region all the same; the stack's own entry is not.
		{name: "ReplicaInTheReadRegion", params: map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "us-east-1,eu-west-1"},
			idem: []string{"us-east-1", "eu-west-1"}, effect: []string{"us-east-1", "eu-west-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defs, err := tables.EmbeddedWithParameters(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if got := defs["IdempotencyTable"].ReplicaRegions; !slices.Equal(got, tc.idem) {
				t.Errorf("IdempotencyTable replica regions %q, want %q", got, tc.idem)
			}
			if got := defs["EffectsTable"].ReplicaRegions; !slices.Equal(got, tc.effect) {
				t.Errorf("EffectsTable replica regions %q, want %q", got, tc.effect)
			}
			for _, id := range []string{"RunsTable", "FenceTable", "ApiKeysTable"} {
				if got := defs[id].ReplicaRegions; len(got) != 0 {
					t.Errorf("%s replica regions %q, want none", id, got)
				}
			}
			for id, d := range defs {
				if len(d.ReplicasUnread) != 0 {
					t.Errorf("%s: unread replicas %q", id, d.ReplicasUnread)
				}
			}
		})
	}
}

// TestDefsFnSplit: Fn::Split as CloudFormation evaluates it, empty parts
// kept; a Replicas entry the resolver cannot read is said, not dropped.
func TestDefsFnSplit(t *testing.T) {
	const tmpl = `
Parameters:
  Regions: {Type: String, Default: "eu-west-1,,ap-south-1"}
Resources:
  GT:
    Type: AWS::DynamoDB::GlobalTable
    Properties:
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      Replicas:
        - Region: !Ref AWS::Region
        - Region: !Select [0, !Split [",", !Ref Regions]]
        - Region: !Select [2, !Split [",", !Ref Regions]]
        - !If [Never, {Region: !Select [1, !Split [",", !Ref Regions]]}, !Ref AWS::NoValue]
        - Region: !ImportValue third-region
Conditions:
  Never: !Equals [!Select [1, !Split [",", !Ref Regions]], "x"]
`
	defs, err := tables.DefsInRegion([]byte(tmpl), "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	gt := defs["GT"]
	if want := []string{"eu-west-1", "ap-south-1"}; !slices.Equal(gt.ReplicaRegions, want) {
		t.Errorf("replica regions %q, want %q", gt.ReplicaRegions, want)
	}
	if want := "Replicas entry 5 needs Fn::ImportValue, which is not evaluated here"; len(gt.ReplicasUnread) != 1 || gt.ReplicasUnread[0] != want {
		t.Errorf("unread %q, want entry 5 (Fn::ImportValue)", gt.ReplicasUnread)
	}
	// Check says it as not checked: neither a match nor a difference.
	table := &types.TableDescription{TableName: aws.String("gt"), TableStatus: types.TableStatusActive,
		TableArn:             aws.String("arn:aws:dynamodb:us-west-2:123456789012:table/gt"),
		AttributeDefinitions: gt.AttributeDefinitions, KeySchema: gt.KeySchema,
		Replicas: []types.ReplicaDescription{{RegionName: aws.String("eu-west-1"), ReplicaStatus: types.ReplicaStatusActive}, {RegionName: aws.String("ap-south-1"), ReplicaStatus: types.ReplicaStatusActive}}}
	gt.TTLAttribute = "expiresAt" // as describeOnly answers
	r, err := tables.Check(context.Background(), describeOnly{table}, gt, "gt")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"replicas: the template's Replicas entry 5 needs Fn::ImportValue, which is not evaluated here"}; !r.OK() || !slices.Equal(r.Unchecked, want) {
		t.Errorf("differences %q, unchecked %q; want none and %q", r.Differences, r.Unchecked, want)
	}
}

// describeOnly answers DescribeTable with table, and DescribeTimeToLive and
// DescribeContinuousBackups as the template's idempotency table has them.
type describeOnly struct{ table *types.TableDescription }

func (f describeOnly) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: f.table}, nil
}

func (f describeOnly) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{
		AttributeName: aws.String("expiresAt"), TimeToLiveStatus: types.TimeToLiveStatusEnabled}}, nil
}

func (f describeOnly) DescribeContinuousBackups(context.Context, *dynamodb.DescribeContinuousBackupsInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeContinuousBackupsOutput, error) {
	return &dynamodb.DescribeContinuousBackupsOutput{ContinuousBackupsDescription: &types.ContinuousBackupsDescription{
		PointInTimeRecoveryDescription: &types.PointInTimeRecoveryDescription{PointInTimeRecoveryStatus: types.PointInTimeRecoveryStatusEnabled}}}, nil
}

// RED_TEAM 486: Check compares DescribeTable's Replicas with the template's
// replica regions. Before the fix a table without its replica in a
// ReplicaRegions region was ok.
func TestCheckReplicas(t *testing.T) {
	defs, err := tables.EmbeddedWithParameters(map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1,eu-central-1"})
	if err != nil {
		t.Fatal(err)
	}
	single, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	const name = "prod-IdempotencyTable"
	replica := func(region string, status types.ReplicaStatus, desc string) types.ReplicaDescription {
		r := types.ReplicaDescription{RegionName: aws.String(region), ReplicaStatus: status}
		if desc != "" {
			r.ReplicaStatusDescription = aws.String(desc)
		}
		return r
	}
	described := func(arnRegion, version string, reps ...types.ReplicaDescription) *types.TableDescription {
		d := single["IdempotencyTable"]
		t := &types.TableDescription{
			TableName:            aws.String(name),
			TableArn:             aws.String("arn:aws:dynamodb:" + arnRegion + ":123456789012:table/" + name),
			TableStatus:          types.TableStatusActive,
			AttributeDefinitions: d.AttributeDefinitions,
			KeySchema:            d.KeySchema,
			StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: d.StreamViewType},
			Replicas:             reps,
			// As the template deploys it (RED_TEAM 515).
			DeletionProtectionEnabled: aws.Bool(true),
		}
		if version != "" {
			t.GlobalTableVersion = aws.String(version)
		}
		return t
	}
	create := func(region string) string {
		return `create it: aws dynamodb update-table --table-name ` + name + ` --region us-east-1 --replica-updates '[{"Create":{"RegionName":"` + region + `"}}]'`
	}
	for _, tc := range []struct {
		name      string
		def       tables.Def
		table     *types.TableDescription
		want      []string // the differences, whole
		unchecked string   // a substring of the one unchecked line
	}{
		{name: "AllActive", def: defs["IdempotencyTable"], table: described("us-east-1", "2019.11.21",
			replica("eu-west-1", types.ReplicaStatusActive, ""), replica("eu-central-1", types.ReplicaStatusActive, ""))},
		// DescribeTable may list the described replica too: it is not
		// another region's.
		{name: "AllActiveWithOwn", def: defs["IdempotencyTable"], table: described("us-east-1", "2019.11.21",
			replica("us-east-1", types.ReplicaStatusActive, ""), replica("eu-west-1", types.ReplicaStatusActive, ""), replica("eu-central-1", types.ReplicaStatusActive, ""))},
		{name: "NoReplicas", def: defs["IdempotencyTable"], table: described("us-east-1", ""), want: []string{
			"replica eu-west-1: missing (template: a replica in eu-west-1; the functions there find no table); " + create("eu-west-1"),
			"replica eu-central-1: missing (template: a replica in eu-central-1; the functions there find no table); " + create("eu-central-1"),
		}},
		{name: "OneRemoved", def: defs["IdempotencyTable"], table: described("us-east-1", "2019.11.21", replica("eu-west-1", types.ReplicaStatusActive, "")), want: []string{
			"replica eu-central-1: missing (template: a replica in eu-central-1; the functions there find no table); " + create("eu-central-1"),
		}},
		{name: "NotActive", def: defs["IdempotencyTable"], table: described("us-east-1", "2019.11.21",
			replica("eu-west-1", types.ReplicaStatusCreationFailed, "the KMS key is not there"), replica("eu-central-1", types.ReplicaStatusCreating, "")), want: []string{
			"replica eu-west-1: CREATION_FAILED, not ACTIVE (the KMS key is not there); the functions there cannot use it until it is ACTIVE",
			"replica eu-central-1: CREATING, not ACTIVE; check again once it is ACTIVE",
		}},
		{name: "Deleting", def: defs["IdempotencyTable"], table: described("us-east-1", "2019.11.21",
			replica("eu-west-1", types.ReplicaStatusActive, ""), replica("eu-central-1", types.ReplicaStatusDeleting, "")), want: []string{
			"replica eu-central-1: DELETING, not ACTIVE; it is being removed: once it is gone, create it again: " + strings.TrimPrefix(create("eu-central-1"), "create it: "),
		}},
		{name: "RegionDisabled", def: defs["IdempotencyTable"], table: described("us-east-1", "2019.11.21",
			replica("eu-west-1", types.ReplicaStatusActive, ""), replica("eu-central-1", types.ReplicaStatusRegionDisabled, "")), want: []string{
			"replica eu-central-1: REGION_DISABLED, not ACTIVE; the functions there cannot use it until it is ACTIVE",
		}},
		// Described in a replica region (--region eu-west-1): that region
		// is the table described, not a replica it lacks.
		{name: "DescribedInAReplicaRegion", def: defs["IdempotencyTable"], table: described("eu-west-1", "2019.11.21",
			replica("us-east-1", types.ReplicaStatusActive, ""), replica("eu-central-1", types.ReplicaStatusActive, ""))},
		// An emulator's ARN names no region: no --region in the command.
		{name: "ARNWithoutRegion", def: defs["EffectsTable"], table: func() *types.TableDescription {
			t := described("ddblocal", "")
			t.TableArn = aws.String("arn:aws:dynamodb:ddblocal:000000000000:table/" + name)
			return t
		}(), want: []string{
			`replica eu-west-1: missing (template: a replica in eu-west-1; the functions there find no table); create it: aws dynamodb update-table --table-name ` + name + ` --replica-updates '[{"Create":{"RegionName":"eu-west-1"}}]'`,
			`replica eu-central-1: missing (template: a replica in eu-central-1; the functions there find no table); create it: aws dynamodb update-table --table-name ` + name + ` --replica-updates '[{"Create":{"RegionName":"eu-central-1"}}]'`,
		}},
		// A first-version global table: DescribeTable lists no replicas.
		{name: "Legacy", def: defs["IdempotencyTable"], table: described("us-east-1", "2017.11.29"), unchecked: "version 2017.11.29"},
		// A single-region stack: replicas on the deployed table are not
		// differences, none are asked for.
		{name: "SingleRegionWithReplicas", def: single["IdempotencyTable"], table: described("us-east-1", "2019.11.21", replica("eu-west-1", types.ReplicaStatusCreating, ""))},
		{name: "SingleRegion", def: single["IdempotencyTable"], table: described("us-east-1", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.def
			if d.LogicalID == "EffectsTable" { // compared with the idempotency table's shape
				d.AttributeDefinitions, d.KeySchema, d.GlobalSecondaryIndexes = single["IdempotencyTable"].AttributeDefinitions, single["IdempotencyTable"].KeySchema, nil
			}
			r, err := tables.Check(context.Background(), describeOnly{tc.table}, d, name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Differences, tc.want) {
				t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(r.Differences, "\n"), strings.Join(tc.want, "\n"))
			}
			if tc.unchecked == "" && len(r.Unchecked) != 0 || tc.unchecked != "" && (len(r.Unchecked) != 1 || !strings.Contains(r.Unchecked[0], tc.unchecked)) {
				t.Errorf("unchecked %q, want %q", r.Unchecked, tc.unchecked)
			}
			if r.OK() != (len(tc.want) == 0) {
				t.Errorf("OK() = %v with differences %q", r.OK(), r.Differences)
			}
		})
	}
}

// RED_TEAM 486, on the engines: none of them hosts a replica. DynamoDB
// Local refuses UpdateTable's ReplicaUpdates ("Nothing to update") and
// dynalite too (it does not know the parameter); moto accepts it and
// creates nothing. None lists Replicas in DescribeTable. So on each, a
// table created from the template's multi-region definition has its
// replicas reported missing, and the same table checked as a single-region
// stack's is ok.
func TestCheckReplicasOnTheEngines(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := e.Client()
		multi, err := tables.EmbeddedWithParameters(map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1,eu-central-1"})
		if err != nil {
			t.Fatal(err)
		}
		single, err := tables.Embedded()
		if err != nil {
			t.Fatal(err)
		}
		name := e.CreateTable(t, "IdempotencyTable")
		_, err = c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name),
			ReplicaUpdates: []types.ReplicationGroupUpdate{{Create: &types.CreateReplicationGroupMemberAction{RegionName: aws.String("eu-west-1")}}}})
		t.Logf("%s: UpdateTable with ReplicaUpdates: %v", e.Kind, err)
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Table.Replicas) != 0 {
			t.Fatalf("%s lists replicas %+v: this test's premise (no engine hosts one) no longer holds; check them here", e.Kind, out.Table.Replicas)
		}
		r, err := tables.Check(ctx, c, multi["IdempotencyTable"], name)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := tables.Check(ctx, c, single["IdempotencyTable"], name)
		if err != nil {
			t.Fatal(err)
		}
		// What else the engine lacks (a stream on dynalite) differs
		// alike under both; the replicas only under the multi-region one.
		var replicas, others []string
		for _, d := range r.Differences {
			if strings.HasPrefix(d, "replica ") {
				replicas = append(replicas, d)
			} else {
				others = append(others, d)
			}
		}
		if len(replicas) != 2 || !strings.HasPrefix(replicas[0], "replica eu-west-1: missing") ||
			!strings.HasPrefix(replicas[1], "replica eu-central-1: missing") ||
			!strings.HasSuffix(replicas[0], ` --replica-updates '[{"Create":{"RegionName":"eu-west-1"}}]'`) {
			t.Errorf("multi-region: differences %q, want eu-west-1 and eu-central-1 missing", r.Differences)
		}
		if !slices.Equal(others, rs.Differences) || slices.ContainsFunc(rs.Differences, func(d string) bool { return strings.HasPrefix(d, "replica ") }) {
			t.Errorf("single-region: differences %q, want those of the multi-region check but its replicas (%q)", rs.Differences, others)
		}
	})
}
