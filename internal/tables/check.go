package tables

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CheckAPI is the part of *dynamodb.Client that Check uses: describe calls
// only, so a read-only role can run it.
type CheckAPI interface {
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	DescribeContinuousBackups(context.Context, *dynamodb.DescribeContinuousBackupsInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeContinuousBackupsOutput, error)
}

// Report is what Check found about one deployed table.
type Report struct {
	// LogicalID is the template resource the table is compared with.
	LogicalID string
	// TableName is the deployed table's name.
	TableName string
	// Missing says no table of that name exists (renamed, deleted, never
	// created, or another region or account).
	Missing bool
	// Differences lists, one line each, what the deployed table does not
	// have that the template gives it; empty when it matches.
	Differences []string
	// Unchecked lists what the endpoint could not report (an emulator that
	// does not implement DescribeContinuousBackups); not a difference.
	Unchecked []string
	// Replicas are the regions of the replicas DescribeTable lists, other
	// than the one described, whatever their status: a global table's
	// replicas, whether or not the template names them.
	Replicas []string
	// ActiveReplicas are the regions of d.ReplicaRegions, other than the
	// one described, whose replica DescribeTable lists ACTIVE: those
	// CheckReplica can check in their own region.
	ActiveReplicas []string
}

// OK reports whether the table exists and nothing differs.
func (r Report) OK() bool { return !r.Missing && len(r.Differences) == 0 }

// errNoTableDescribed is Check's error when the endpoint's DescribeTable
// answer succeeded but describes no table: not DynamoDB's answer.
var errNoTableDescribed = errors.New("the endpoint's DescribeTable answer describes no table, which is no DynamoDB answer (the address of an API or a web server, not of the engine?)")

// Check compares the deployed table name with the template's definition d:
// its status and its template indexes' (usable: ACTIVE or UPDATING), the
// key schema and key attribute types, each secondary index (keys,
// projection), the stream and its view type, a global table's replicas in
// d.ReplicaRegions (each there and ACTIVE) and its multi-region
// consistency, deletion protection (when d has it), the TTL attribute and
// point-in-time recovery. Extra indexes
// and extra replicas on the deployed table are not differences. A missing
// table is a Report with Missing set, not an error; an error is a call that failed otherwise (credentials, network),
// and the Report then holds the differences the calls before it found.
func Check(ctx context.Context, c CheckAPI, d Def, name string) (Report, error) {
	r := Report{LogicalID: d.LogicalID, TableName: name}
	out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		r.Missing = true
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("tables: describe %s: %w", name, err)
	}
	if out == nil || out.Table == nil {
		// An endpoint that answered 200 with JSON, but no table.
		return r, fmt.Errorf("tables: describe %s: %w", name, errNoTableDescribed)
	}
	t := out.Table
	gotTypes := attrTypes(t.AttributeDefinitions)
	wantTypes := attrTypes(d.AttributeDefinitions)
	differ := func(format string, a ...any) { r.Differences = append(r.Differences, fmt.Sprintf(format, a...)) }

	// A table that is not usable is a difference whatever its shape
	// (RED_TEAM 487); UPDATING is usable. An answer without a status
	// (an emulator's) is not judged.
	if st := t.TableStatus; st != "" && st != types.TableStatusActive && st != types.TableStatusUpdating {
		differ("table status: %s, not ACTIVE; %s", st, tableStatusAdvice(st))
	}

	if want, got := keysString(d.KeySchema, wantTypes), keysString(t.KeySchema, gotTypes); want != got {
		differ("key schema: template %s, deployed %s", want, got)
	}
	type keys = []types.KeySchemaElement
	differIndexes(differ, "global secondary index",
		indexStrings(d.GlobalSecondaryIndexes, wantTypes, func(g types.GlobalSecondaryIndex) (*string, keys, *types.Projection) {
			return g.IndexName, g.KeySchema, g.Projection
		}),
		indexStrings(t.GlobalSecondaryIndexes, gotTypes, func(g types.GlobalSecondaryIndexDescription) (*string, keys, *types.Projection) {
			return g.IndexName, g.KeySchema, g.Projection
		}))
	// A template index the table has but cannot query yet, or soon no
	// longer (RED_TEAM 488); UPDATING is usable.
	for _, g := range t.GlobalSecondaryIndexes {
		name := aws.ToString(g.IndexName)
		if !slices.ContainsFunc(d.GlobalSecondaryIndexes, func(w types.GlobalSecondaryIndex) bool { return aws.ToString(w.IndexName) == name }) {
			continue
		}
		switch g.IndexStatus {
		case types.IndexStatusCreating:
			differ("global secondary index %s: CREATING, not ACTIVE (backfilling: DynamoDB refuses queries of it); check again once it is ACTIVE", name)
		case types.IndexStatusDeleting:
			differ("global secondary index %s: DELETING, not ACTIVE (queries of it fail); once it is gone, create it again as the template gives it", name)
		}
	}
	differIndexes(differ, "local secondary index",
		indexStrings(d.LocalSecondaryIndexes, wantTypes, func(l types.LocalSecondaryIndex) (*string, keys, *types.Projection) {
			return l.IndexName, l.KeySchema, l.Projection
		}),
		indexStrings(t.LocalSecondaryIndexes, gotTypes, func(l types.LocalSecondaryIndexDescription) (*string, keys, *types.Projection) {
			return l.IndexName, l.KeySchema, l.Projection
		}))

	var view types.StreamViewType
	if s := t.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		view = s.StreamViewType
	}
	switch {
	case d.StreamViewType != "" && view == "":
		differ("stream: missing (template %s; the functions that read it never run)", d.StreamViewType)
	case d.StreamViewType != "" && view != d.StreamViewType:
		differ("stream: template %s, deployed %s", d.StreamViewType, view)
	case d.StreamViewType == "" && view != "":
		differ("stream: template none, deployed %s", view)
	}

	differReplicas(&r, d, t)

	// A global table's multi-region consistency (RED_TEAM 489): none
	// given is EVENTUAL, on either side.
	if d.Type == "AWS::DynamoDB::GlobalTable" {
		want, got := d.MultiRegionConsistency, t.MultiRegionConsistency
		if want == "" {
			want = types.MultiRegionConsistencyEventual
		}
		if got == "" {
			got = types.MultiRegionConsistencyEventual
		}
		if want != got {
			differ("multi-region consistency: template %s, deployed %s (chosen when the table's replicas were created; if the stack was deployed with the other, read the template with the parameters it was deployed with)", want, got)
		}
	}

	// Deletion protection (RED_TEAM 515): without it one delete-table call
	// removes the records every retried key and effect is answered from.
	if d.DeletionProtection && !aws.ToBool(t.DeletionProtectionEnabled) {
		differ("deletion protection: disabled (template: enabled; one delete-table call removes the table and every record in it); turn it on: %s",
			deletionProtectionCommand(name, arnRegion(aws.ToString(t.TableArn))))
	}

	ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	switch {
	case IsUnsupported(err):
		r.Unchecked = append(r.Unchecked, "TTL: the endpoint does not implement DescribeTimeToLive")
	case err != nil:
		return r, fmt.Errorf("tables: describe TTL of %s: %w", name, err)
	default:
		got := ""
		if desc := ttl.TimeToLiveDescription; desc != nil &&
			(desc.TimeToLiveStatus == types.TimeToLiveStatusEnabled || desc.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			got = aws.ToString(desc.AttributeName)
		}
		switch {
		case d.TTLAttribute != "" && got == "":
			differ("TTL: disabled (template: attribute %s; expired records are never deleted)", d.TTLAttribute)
		case d.TTLAttribute != got:
			differ("TTL: template %s, deployed %s", orNone(d.TTLAttribute), orNone(got))
		}
	}

	cb, err := c.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
	switch {
	case IsUnsupported(err):
		r.Unchecked = append(r.Unchecked, "point-in-time recovery: the endpoint does not implement DescribeContinuousBackups")
	case err != nil:
		return r, fmt.Errorf("tables: describe continuous backups of %s: %w", name, err)
	default:
		on := false
		if desc := cb.ContinuousBackupsDescription; desc != nil && desc.PointInTimeRecoveryDescription != nil {
			on = desc.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == types.PointInTimeRecoveryStatusEnabled
		}
		if d.PointInTimeRecovery && !on {
			differ("point-in-time recovery: disabled (template: enabled)")
		}
	}
	return r, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func attrTypes(defs []types.AttributeDefinition) map[string]types.ScalarAttributeType {
	m := map[string]types.ScalarAttributeType{}
	for _, a := range defs {
		m[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	return m
}

// keysString renders a key schema as "pk S (HASH), sk S (RANGE)".
func keysString(ks []types.KeySchemaElement, attr map[string]types.ScalarAttributeType) string {
	ks = slices.Clone(ks)
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].KeyType == types.KeyTypeHash && ks[j].KeyType != types.KeyTypeHash })
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %s (%s)", aws.ToString(k.AttributeName), attr[aws.ToString(k.AttributeName)], k.KeyType)
	}
	return strings.Join(parts, ", ")
}

// namedIndex is an index's name and its indexString.
type namedIndex struct{ name, desc string }

// indexStrings renders each index of list (a template's or a deployed
// table's, global or local) in list's order; parts returns an index's
// name, key schema and projection.
func indexStrings[I any](list []I, attr map[string]types.ScalarAttributeType, parts func(I) (*string, []types.KeySchemaElement, *types.Projection)) []namedIndex {
	out := make([]namedIndex, len(list))
	for i, x := range list {
		name, ks, p := parts(x)
		out[i] = namedIndex{aws.ToString(name), indexString(ks, attr, p)}
	}
	return out
}

// differIndexes reports, in the template's order, each template index of
// kind the deployed table lacks or has with other keys or projection.
// Extra deployed indexes are not differences.
func differIndexes(differ func(format string, a ...any), kind string, template, deployed []namedIndex) {
	got := make(map[string]string, len(deployed))
	for _, x := range deployed {
		got[x.name] = x.desc
	}
	for _, want := range template {
		have, ok := got[want.name]
		switch {
		case !ok:
			differ("%s %s: missing (template %s)", kind, want.name, want.desc)
		case have != want.desc:
			differ("%s %s: template %s, deployed %s", kind, want.name, want.desc, have)
		}
	}
}

// indexString renders an index's keys and projection.
func indexString(ks []types.KeySchemaElement, attr map[string]types.ScalarAttributeType, p *types.Projection) string {
	proj := types.ProjectionTypeAll
	var extra []string
	if p != nil {
		if p.ProjectionType != "" {
			proj = p.ProjectionType
		}
		extra = slices.Sorted(slices.Values(p.NonKeyAttributes))
	}
	s := keysString(ks, attr) + ", projection " + string(proj)
	if len(extra) > 0 {
		s += " " + strings.Join(extra, " ")
	}
	return s
}

// legacyGlobalTable is the GlobalTableVersion of the first global tables,
// whose replicas DescribeTable does not list (DescribeGlobalTable does).
const legacyGlobalTable = "2017.11.29"

// differReplicas compares d's replica regions with the replicas the
// deployed table t's DescribeTable answer lists (RED_TEAM 486): each
// region of d.ReplicaRegions other than the one t is in (its ARN's) must
// be listed, and ACTIVE. A region missing is a difference that gives the
// command creating the replica; one listed in another status a difference
// naming the status.
func differReplicas(r *Report, d Def, t *types.TableDescription) {
	for _, why := range d.ReplicasUnread {
		r.Unchecked = append(r.Unchecked, "replicas: the template's "+why)
	}
	here := arnRegion(aws.ToString(t.TableArn))
	got := make(map[string]types.ReplicaDescription, len(t.Replicas))
	for _, rep := range t.Replicas {
		region := aws.ToString(rep.RegionName)
		got[region] = rep
		if region != here && region != "" {
			r.Replicas = append(r.Replicas, region)
		}
	}
	if len(d.ReplicaRegions) == 0 {
		return
	}
	if v := aws.ToString(t.GlobalTableVersion); v == legacyGlobalTable {
		r.Unchecked = append(r.Unchecked, fmt.Sprintf("replicas (template: %s): a global table of version %s, whose replicas DescribeTable does not list (aws dynamodb describe-global-table does)",
			strings.Join(d.ReplicaRegions, ", "), v))
		return
	}
	name := r.TableName // as the functions name it, whatever the answer says
	for _, region := range d.ReplicaRegions {
		if region == here {
			continue // the replica described
		}
		rep, ok := got[region]
		if !ok {
			r.Differences = append(r.Differences, fmt.Sprintf("replica %s: missing (template: a replica in %s; the functions there find no table); create it: %s",
				region, region, createReplicaCommand(name, here, region)))
			continue
		}
		if rep.ReplicaStatus == types.ReplicaStatusActive {
			r.ActiveReplicas = append(r.ActiveReplicas, region)
			continue
		}
		status := string(rep.ReplicaStatus)
		if status == "" {
			status = "no status"
		}
		line := fmt.Sprintf("replica %s: %s, not ACTIVE", region, status)
		if desc := aws.ToString(rep.ReplicaStatusDescription); desc != "" {
			line += " (" + desc + ")"
		}
		switch rep.ReplicaStatus {
		case types.ReplicaStatusCreating, types.ReplicaStatusUpdating:
			line += "; check again once it is ACTIVE"
		case types.ReplicaStatusDeleting:
			line += "; it is being removed: once it is gone, create it again: " + createReplicaCommand(name, here, region)
		default:
			line += "; the functions there cannot use it until it is ACTIVE"
		}
		r.Differences = append(r.Differences, line)
	}
}

// CheckReplica checks the replica in region of the global table name, the
// template's d, with c, a client of that region (RED_TEAM 516): what
// DynamoDB keeps per replica and the template gives each (d.ReplicaSettings):
// its deletion protection (DescribeTable) and point-in-time recovery
// (DescribeContinuousBackups), and that it is there and usable. TTL, the
// stream, keys and indexes are one setting of the whole global table,
// which Check compares in the region it describes. Every line names the
// replica ("replica eu-west-1: ..."). The error of a call names the
// replica's region.
func CheckReplica(ctx context.Context, c CheckAPI, d Def, name, region string) (Report, error) {
	r := Report{LogicalID: d.LogicalID, TableName: name}
	// A table named by its ARN is described in the replica's region by
	// that region's ARN: DynamoDB refuses an ARN of another region.
	name = replicaARN(name, region)
	want := d.ReplicaSettings[region]
	differ := func(format string, a ...any) {
		r.Differences = append(r.Differences, "replica "+region+": "+fmt.Sprintf(format, a...))
	}
	out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		differ("no table of this name in %s, though the global table lists its replica there ACTIVE (credentials of another account for that region?)", region)
		return r, nil
	case err != nil:
		return r, fmt.Errorf("tables: describe %s: replica %s: %w", name, region, err)
	case out == nil || out.Table == nil:
		return r, fmt.Errorf("tables: describe %s: replica %s: %w", name, region, errNoTableDescribed)
	}
	t := out.Table
	if st := t.TableStatus; st != "" && st != types.TableStatusActive && st != types.TableStatusUpdating {
		differ("table status: %s, not ACTIVE; %s", st, tableStatusAdvice(st))
	}
	if want.DeletionProtection && !aws.ToBool(t.DeletionProtectionEnabled) {
		differ("deletion protection: disabled (template: enabled; one delete-table call removes the table and every record in it); turn it on: %s",
			deletionProtectionCommand(name, region))
	}
	cb, err := c.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
	switch {
	case IsUnsupported(err):
		r.Unchecked = append(r.Unchecked, "replica "+region+": point-in-time recovery: the endpoint does not implement DescribeContinuousBackups")
	case err != nil:
		return r, fmt.Errorf("tables: describe continuous backups of %s: replica %s: %w", name, region, err)
	default:
		on := false
		if desc := cb.ContinuousBackupsDescription; desc != nil && desc.PointInTimeRecoveryDescription != nil {
			on = desc.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == types.PointInTimeRecoveryStatusEnabled
		}
		if want.PointInTimeRecovery && !on {
			differ("point-in-time recovery: disabled (template: enabled); turn it on: aws dynamodb update-continuous-backups --table-name %s --region %s --point-in-time-recovery-specification PointInTimeRecoveryEnabled=true", name, region)
		}
	}
	return r, nil
}

// replicaARN is name with its region replaced by region when name is a
// table ARN (arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME), else name.
func replicaARN(name, region string) string {
	parts := strings.SplitN(name, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" || parts[2] != "dynamodb" {
		return name
	}
	parts[3] = region
	return strings.Join(parts, ":")
}

// createReplicaCommand is the AWS CLI command that adds a replica in
// region to the global table name, run in the region here (omitted when
// the table's ARN names none).
func createReplicaCommand(name, here, region string) string {
	cmd := "aws dynamodb update-table --table-name " + name
	if here != "" {
		cmd += " --region " + here
	}
	return cmd + ` --replica-updates '[{"Create":{"RegionName":"` + region + `"}}]'`
}

// deletionProtectionCommand is the AWS CLI command that turns deletion
// protection on for the table name in region here (omitted when "").
func deletionProtectionCommand(name, here string) string {
	cmd := "aws dynamodb update-table --table-name " + name
	if here != "" {
		cmd += " --region " + here
	}
	return cmd + " --deletion-protection-enabled"
}

// arnRegion is the region of a table ARN (arn:PARTITION:dynamodb:REGION:
// ACCOUNT:table/NAME), "" when it names none that reads as a region (an
// emulator's "ddblocal").
func arnRegion(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" || !regionName.MatchString(parts[3]) {
		return ""
	}
	return parts[3]
}

// regionName is what an AWS region name looks like (eu-west-1,
// us-gov-west-1, cn-north-1).
var regionName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// tableStatusAdvice says what a table status other than ACTIVE and
// UPDATING means for the functions, and what to do.
func tableStatusAdvice(st types.TableStatus) string {
	switch st {
	case types.TableStatusCreating:
		return "check again once it is ACTIVE"
	case types.TableStatusDeleting:
		return "it is being deleted: the functions' calls fail once it is gone (restore it from a backup, or create it from the template)"
	case types.TableStatusInaccessibleEncryptionCredentials:
		return "its KMS key cannot be used, so every call to it fails: restore access to the key (after seven days without it the table is archived)"
	case types.TableStatusArchiving:
		return "it is being archived (its KMS key could not be used): restore it from its backup"
	case types.TableStatusArchived:
		return "it was archived (its KMS key could not be used): restore it from its backup"
	default:
		return "see why in aws dynamodb describe-table"
	}
}
