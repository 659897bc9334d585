// Package tables creates local DynamoDB tables from the DynamoDB resources of
// template.yaml, the single source of truth for table shapes.
//
// Supported resource types are AWS::DynamoDB::Table and
// AWS::DynamoDB::GlobalTable. The properties that shape a table are honoured:
// AttributeDefinitions, KeySchema, GlobalSecondaryIndexes,
// LocalSecondaryIndexes, BillingMode (PAY_PER_REQUEST, or PROVISIONED with
// ProvisionedThroughput, default 5/5), StreamSpecification (top-level for a
// GlobalTable, where it has no StreamEnabled flag) and
// TimeToLiveSpecification (applied with UpdateTimeToLive after creation).
// Replication (Replicas), SSE, tags, deletion protection, contributor
// insights and TableName are ignored: local tables get the name the caller
// chooses. Point-in-time recovery, deletion protection and a GlobalTable's
// replica regions are read (Def.PointInTimeRecovery, Def.DeletionProtection,
// Def.ReplicaRegions, which Check compares with a deployed table) but not
// applied locally.
//
// CloudFormation intrinsics in both spellings (!Ref / {"Ref": ...}) are
// evaluated with parameter defaults and fixed pseudo parameters (region
// us-east-1 unless overridden, account 123456789012): Ref, Fn::If, Fn::Sub,
// Fn::Join, Fn::Select, Fn::Split and the condition functions. A property that needs an
// intrinsic that cannot be evaluated locally (Fn::GetAtt, Fn::ImportValue, a
// Ref to another resource) is an error only if it shapes the table; elsewhere
// it is ignored. A resource-level Condition is recorded (Def.Condition,
// Def.Enabled) but does not stop local creation: tests need every table.
package tables

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gopkg.in/yaml.v3"
)

// otherRegion is the AWS::Region a Replicas entry is read in a second time
// to tell the stack's own replica (its Region changes) from another.
const otherRegion = "xx-other-1"

// DefaultRegion is the value of the AWS::Region pseudo parameter used when
// resolving the template.
const DefaultRegion = "us-east-1"

// ReplicaSetting is what a global table's template gives one replica.
type ReplicaSetting struct {
	PointInTimeRecovery bool
	DeletionProtection  bool
}

// Def is the local-creation view of one DynamoDB resource of the template.
type Def struct {
	// LogicalID is the resource's logical ID, e.g. "EffectsTable".
	LogicalID string
	// Type is AWS::DynamoDB::Table or AWS::DynamoDB::GlobalTable.
	Type string
	// Condition is the resource-level Condition name, "" if none.
	Condition string
	// Enabled reports whether Condition holds with parameter defaults
	// (true when there is no condition). Local creation ignores it.
	Enabled bool

	AttributeDefinitions   []types.AttributeDefinition
	KeySchema              []types.KeySchemaElement
	GlobalSecondaryIndexes []types.GlobalSecondaryIndex
	LocalSecondaryIndexes  []types.LocalSecondaryIndex
	// BillingMode is PAY_PER_REQUEST or PROVISIONED.
	BillingMode types.BillingMode
	// ProvisionedThroughput is set only for PROVISIONED tables.
	ProvisionedThroughput *types.ProvisionedThroughput
	// StreamViewType is the stream view, "" when the table has no stream.
	StreamViewType types.StreamViewType
	// TTLAttribute is the TTL attribute name, "" when TTL is not enabled.
	TTLAttribute string
	// PointInTimeRecovery says the table (for a GlobalTable, its replica in
	// the template's region) has point-in-time recovery enabled. Local
	// creation ignores it; Check compares it.
	PointInTimeRecovery bool
	// DeletionProtection says the table (for a GlobalTable, its replica in
	// the template's region) has DeletionProtectionEnabled. Local creation
	// ignores it (local tables must be deletable); Check compares it.
	DeletionProtection bool
	// ReplicaRegions are a GlobalTable's replica regions other than the
	// stack's own (the Replicas entries whose Region is not AWS::Region:
	// under the built-in template, ReplicaRegions'), in the template's
	// order; none for a Table or a single-region stack. Local creation
	// ignores them; Check compares them with the deployed table's replicas.
	ReplicaRegions []string
	// ReplicaSettings are, per region of ReplicaRegions, what the template
	// gives that replica alone (DynamoDB keeps them per replica): its
	// point-in-time recovery and deletion protection. CheckReplica compares
	// them in the replica's region.
	ReplicaSettings map[string]ReplicaSetting
	// MultiRegionConsistency is a GlobalTable's MultiRegionConsistency as
	// the template gives it (STRONG for MRSC), "" when it gives none
	// (EVENTUAL, DynamoDB's default). Check compares it.
	MultiRegionConsistency types.MultiRegionConsistency
	// ReplicasUnread says why Replicas entries could not be read locally
	// (an intrinsic the resolver cannot evaluate): Check reports their
	// regions as not checked.
	ReplicasUnread []string
}

// CreateTableInput returns the CreateTable request for this definition,
// naming the table tableName.
func (d Def) CreateTableInput(tableName string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:              aws.String(tableName),
		AttributeDefinitions:   d.AttributeDefinitions,
		KeySchema:              d.KeySchema,
		GlobalSecondaryIndexes: d.GlobalSecondaryIndexes,
		LocalSecondaryIndexes:  d.LocalSecondaryIndexes,
		BillingMode:            d.BillingMode,
		ProvisionedThroughput:  d.ProvisionedThroughput,
	}
	if d.StreamViewType != "" {
		in.StreamSpecification = &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: d.StreamViewType,
		}
	}
	return in
}

// Defs parses template and returns its DynamoDB table resources keyed by
// logical ID, with AWS::Region resolved to DefaultRegion.
func Defs(template []byte) (map[string]Def, error) {
	return DefsInRegion(template, DefaultRegion)
}

// DefsInRegion is Defs with AWS::Region resolved to region.
func DefsInRegion(template []byte, region string) (map[string]Def, error) {
	return DefsWithParameters(template, region, nil)
}

// DefsWithParameters is DefsInRegion with parameters given values: each
// value of params (by parameter name) takes the place of that parameter's
// default, so the tables are read as a stack deployed with those values
// has them (under CrossRegion=fenced-effects, say, the idempotency table
// has no TTL). A name the template does not declare, or a value the
// parameter's constraints refuse as CloudFormation would (AllowedValues,
// AllowedPattern, MinLength/MaxLength, MinValue/MaxValue, a Number that is
// no number), is a *ParameterError.
func DefsWithParameters(template []byte, region string, params map[string]string) (map[string]Def, error) {
	root, err := parseRoot(template)
	if err != nil {
		return nil, err
	}
	resources, ok := root["Resources"].(map[string]any)
	if !ok {
		return nil, errors.New("tables: template has no Resources")
	}
	r := newResolver(root, region)
	if err := r.setParameters(root, params); err != nil {
		return nil, err
	}
	defs := map[string]Def{}
	ids := make([]string, 0, len(resources))
	for id := range resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		res, _ := resources[id].(map[string]any)
		typ, _ := res["Type"].(string)
		if typ != "AWS::DynamoDB::Table" && typ != "AWS::DynamoDB::GlobalTable" {
			continue
		}
		d, err := parseDef(r, id, typ, res)
		if err != nil {
			return nil, fmt.Errorf("tables: resource %s: %w", id, err)
		}
		defs[id] = d
	}
	return defs, nil
}

func parseDef(r *resolver, id, typ string, res map[string]any) (Def, error) {
	d := Def{LogicalID: id, Type: typ, Enabled: true}
	if c, ok := res["Condition"].(string); ok {
		d.Condition = c
		en, err := r.Condition(c)
		if err != nil {
			return d, err
		}
		d.Enabled = en
	}
	props, _ := res["Properties"].(map[string]any)
	// get resolves one top-level property; unresolvable intrinsics are errors
	// because every property read here shapes the table.
	get := func(name string) (any, error) {
		v, ok := props[name]
		if !ok {
			return nil, nil
		}
		rv, err := r.resolve(v)
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", name, err)
		}
		if _, ok := rv.(noValue); ok {
			return nil, nil
		}
		return rv, nil
	}
	// each resolves the list property name and calls f with each entry.
	each := func(name string, f func(m map[string]any)) error {
		v, err := get(name)
		if err != nil {
			return err
		}
		for _, e := range list(v) {
			f(mapOf(e))
		}
		return nil
	}

	if err := each("AttributeDefinitions", func(m map[string]any) {
		d.AttributeDefinitions = append(d.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(str(m["AttributeName"])),
			AttributeType: types.ScalarAttributeType(str(m["AttributeType"])),
		})
	}); err != nil {
		return d, err
	}
	ks, err := get("KeySchema")
	if err != nil {
		return d, err
	}
	d.KeySchema = keySchema(ks)
	if len(d.KeySchema) == 0 {
		return d, errors.New("no KeySchema")
	}

	bm, err := get("BillingMode")
	if err != nil {
		return d, err
	}
	d.BillingMode = types.BillingMode(str(bm))
	if d.BillingMode == "" {
		if typ == "AWS::DynamoDB::GlobalTable" {
			d.BillingMode = types.BillingModeProvisioned
		} else if _, has := props["ProvisionedThroughput"]; has {
			d.BillingMode = types.BillingModeProvisioned
		} else {
			d.BillingMode = types.BillingModePayPerRequest
		}
	}
	var tp *types.ProvisionedThroughput
	if d.BillingMode == types.BillingModeProvisioned {
		pt, err := get("ProvisionedThroughput")
		if err != nil {
			return d, err
		}
		tp = throughput(pt)
		d.ProvisionedThroughput = tp
	}

	if err := each("GlobalSecondaryIndexes", func(m map[string]any) {
		name, ks, proj := index(m)
		g := types.GlobalSecondaryIndex{IndexName: name, KeySchema: ks, Projection: proj}
		if tp != nil {
			g.ProvisionedThroughput = throughput(m["ProvisionedThroughput"])
		}
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, g)
	}); err != nil {
		return d, err
	}
	if err := each("LocalSecondaryIndexes", func(m map[string]any) {
		name, ks, proj := index(m)
		d.LocalSecondaryIndexes = append(d.LocalSecondaryIndexes, types.LocalSecondaryIndex{IndexName: name, KeySchema: ks, Projection: proj})
	}); err != nil {
		return d, err
	}

	ss, err := get("StreamSpecification")
	if err != nil {
		return d, err
	}
	if ss != nil {
		m := mapOf(ss)
		enabled := true
		if e, ok := m["StreamEnabled"]; ok {
			enabled = boolOf(e)
		}
		if enabled {
			d.StreamViewType = types.StreamViewType(str(m["StreamViewType"]))
			if d.StreamViewType == "" {
				return d, errors.New("StreamSpecification without StreamViewType")
			}
		}
	}

	if typ == "AWS::DynamoDB::GlobalTable" {
		mrc, err := get("MultiRegionConsistency")
		if err != nil {
			return d, err
		}
		d.MultiRegionConsistency = types.MultiRegionConsistency(str(mrc))
		// Each replica on its own: an entry that needs an intrinsic that
		// cannot be evaluated locally is said in ReplicasUnread, and the
		// others are still read.
		here := r.pseudo["AWS::Region"]
		for i, e := range list(props["Replicas"]) {
			rv, err := r.resolve(e)
			var u unresolved
			switch {
			case errors.As(err, &u):
				d.ReplicasUnread = append(d.ReplicasUnread, fmt.Sprintf("Replicas entry %d needs %s, which is not evaluated here", i+1, u.expr))
				continue
			case err != nil:
				return d, fmt.Errorf("property Replicas: %w", err)
			}
			if _, dropped := rv.(noValue); dropped {
				continue // a replica the stack's parameters leave out
			}
			m := mapOf(rv)
			region := str(m["Region"])
			if region == "" {
				return d, fmt.Errorf("property Replicas: entry %d has no Region", i+1)
			}
			if region == here {
				d.PointInTimeRecovery = boolOf(mapOf(m["PointInTimeRecoverySpecification"])["PointInTimeRecoveryEnabled"])
				d.DeletionProtection = boolOf(m["DeletionProtectionEnabled"])
				// The stack's own replica is the entry that names
				// AWS::Region: read in another region, it names another.
				// An entry naming this region otherwise (a ReplicaRegions
				// region that is the region the template is read in,
				// which need not be the deployed table's) is a replica
				// region: Check leaves out the region it describes.
				if other, err := r.inRegion(otherRegion).resolve(e); err != nil || str(mapOf(other)["Region"]) != region {
					continue
				}
			}
			if !slices.Contains(d.ReplicaRegions, region) {
				d.ReplicaRegions = append(d.ReplicaRegions, region)
				if d.ReplicaSettings == nil {
					d.ReplicaSettings = map[string]ReplicaSetting{}
				}
				d.ReplicaSettings[region] = ReplicaSetting{
					PointInTimeRecovery: boolOf(mapOf(m["PointInTimeRecoverySpecification"])["PointInTimeRecoveryEnabled"]),
					DeletionProtection:  boolOf(m["DeletionProtectionEnabled"]),
				}
			}
		}
	} else {
		pitr, err := get("PointInTimeRecoverySpecification")
		if err != nil {
			return d, err
		}
		d.PointInTimeRecovery = boolOf(mapOf(pitr)["PointInTimeRecoveryEnabled"])
		// Deletion protection does not shape the table: a value that needs
		// an intrinsic not evaluated here leaves it uncompared, never
		// fails the template.
		if dp, err := get("DeletionProtectionEnabled"); err == nil {
			d.DeletionProtection = boolOf(dp)
		} else if !errors.As(err, new(unresolved)) {
			return d, err
		}
	}

	ttl, err := get("TimeToLiveSpecification")
	if err != nil {
		return d, err
	}
	if ttl != nil {
		m := mapOf(ttl)
		if boolOf(m["Enabled"]) {
			d.TTLAttribute = str(m["AttributeName"])
			if d.TTLAttribute == "" {
				return d, errors.New("TimeToLiveSpecification without AttributeName")
			}
		}
	}
	return d, nil
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func str(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func boolOf(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		b, _ := strconv.ParseBool(x)
		return b
	}
	return false
}

// index reads what every secondary index has: its name, key schema and
// projection.
func index(m map[string]any) (*string, []types.KeySchemaElement, *types.Projection) {
	return aws.String(str(m["IndexName"])), keySchema(m["KeySchema"]), projection(m["Projection"])
}

func keySchema(v any) []types.KeySchemaElement {
	var out []types.KeySchemaElement
	for _, e := range list(v) {
		m := mapOf(e)
		out = append(out, types.KeySchemaElement{
			AttributeName: aws.String(str(m["AttributeName"])),
			KeyType:       types.KeyType(str(m["KeyType"])),
		})
	}
	return out
}

func projection(v any) *types.Projection {
	m := mapOf(v)
	p := &types.Projection{ProjectionType: types.ProjectionType(str(m["ProjectionType"]))}
	if p.ProjectionType == "" {
		p.ProjectionType = types.ProjectionTypeAll
	}
	for _, a := range list(m["NonKeyAttributes"]) {
		p.NonKeyAttributes = append(p.NonKeyAttributes, str(a))
	}
	return p
}

func throughput(v any) *types.ProvisionedThroughput {
	m := mapOf(v)
	num := func(k string) int64 {
		n, err := strconv.ParseInt(str(m[k]), 10, 64)
		if err != nil || n <= 0 {
			return 5
		}
		return n
	}
	return &types.ProvisionedThroughput{
		ReadCapacityUnits:  aws.Int64(num("ReadCapacityUnits")),
		WriteCapacityUnits: aws.Int64(num("WriteCapacityUnits")),
	}
}

// Conditions evaluates the conditions of the template's Conditions section
// with parameter defaults and AWS::Region resolved to region: what a stack of
// that configuration deploys (tests check the resources a condition guards).
// A condition that needs an intrinsic the resolver cannot evaluate locally
// (Fn::GetAtt, say) is left out of the map.
func Conditions(template []byte, region string) (map[string]bool, error) {
	root, err := parseRoot(template)
	if err != nil {
		return nil, err
	}
	r := newResolver(root, region)
	out := make(map[string]bool, len(r.conditions))
	for name := range r.conditions {
		ok, err := r.Condition(name)
		var u unresolved
		switch {
		case errors.As(err, &u):
			continue
		case err != nil:
			return nil, err
		}
		out[name] = ok
	}
	return out, nil
}

// parseRoot parses a template's YAML (CloudFormation's short-form tags
// included) into its top-level mapping.
func parseRoot(template []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return nil, fmt.Errorf("tables: parse template: %w", err)
	}
	v, err := toValue(&doc)
	if err != nil {
		return nil, fmt.Errorf("tables: parse template: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("tables: template is not a mapping")
	}
	return root, nil
}

// ParameterError is a parameter value DefsWithParameters refused: the
// template declares no parameter Name, or its constraints refuse Value.
// Reason says which, for a message.
type ParameterError struct {
	Name, Value, Reason string
}

func (e *ParameterError) Error() string {
	return "tables: parameter " + e.Name + "=" + e.Value + ": " + e.Reason
}
