package tables

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit"
)

func TestDefsRealTemplate(t *testing.T) {
	defs, err := Defs(idemkit.Template)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		typ    string
		keys   string
		stream types.StreamViewType
		ttl    string
		gsis   int
	}{
		"IdempotencyTable": {"AWS::DynamoDB::GlobalTable", "pk:HASH", types.StreamViewTypeNewAndOldImages, "expiresAt", 0},
		"RunsTable":        {"AWS::DynamoDB::Table", "pk:HASH", types.StreamViewTypeNewAndOldImages, "expiresAt", 2},
		"EffectsTable":     {"AWS::DynamoDB::GlobalTable", "pk:HASH,sk:RANGE", types.StreamViewTypeNewAndOldImages, "expiresAt", 1},
		"FenceTable":       {"AWS::DynamoDB::Table", "pk:HASH", "", "expiresAt", 0},
		"ApiKeysTable":     {"AWS::DynamoDB::Table", "pk:HASH", "", "", 0},
	}
	for id, w := range want {
		d, ok := defs[id]
		if !ok {
			t.Errorf("%s missing", id)
			continue
		}
		if d.Type != w.typ || keysOf(d.KeySchema) != w.keys || d.StreamViewType != w.stream ||
			d.TTLAttribute != w.ttl || len(d.GlobalSecondaryIndexes) != w.gsis {
			t.Errorf("%s = %+v", id, d)
		}
		if d.BillingMode != types.BillingModePayPerRequest || d.ProvisionedThroughput != nil {
			t.Errorf("%s billing %q %v", id, d.BillingMode, d.ProvisionedThroughput)
		}
		if !d.Enabled {
			t.Errorf("%s disabled", id)
		}
		// Every key attribute must be defined, and only those.
		defined := map[string]bool{}
		for _, a := range d.AttributeDefinitions {
			defined[*a.AttributeName] = true
		}
		used := map[string]bool{}
		for _, k := range d.KeySchema {
			used[*k.AttributeName] = true
		}
		for _, g := range d.GlobalSecondaryIndexes {
			for _, k := range g.KeySchema {
				used[*k.AttributeName] = true
			}
		}
		for a := range defined {
			if !used[a] {
				t.Errorf("%s: attribute %s defined but unused", id, a)
			}
		}
		for a := range used {
			if !defined[a] {
				t.Errorf("%s: attribute %s used but undefined", id, a)
			}
		}
	}
	if len(defs) != len(want) {
		t.Errorf("got %d tables, want %d", len(defs), len(want))
	}
	g := defs["EffectsTable"].GlobalSecondaryIndexes[0]
	if *g.IndexName != "byRun" || keysOf(g.KeySchema) != "runKey:HASH,sk:RANGE" || g.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
		t.Errorf("byRun = %+v", g)
	}
	in := defs["EffectsTable"].CreateTableInput("x")
	if *in.TableName != "x" || !aws.ToBool(in.StreamSpecification.StreamEnabled) {
		t.Errorf("input %+v", in)
	}
	if defs["FenceTable"].CreateTableInput("f").StreamSpecification != nil {
		t.Error("FenceTable has no stream")
	}
}

func keysOf(ks []types.KeySchemaElement) string {
	var p []string
	for _, k := range ks {
		p = append(p, *k.AttributeName+":"+string(k.KeyType))
	}
	return strings.Join(p, ",")
}

const condTemplate = `
Parameters:
  SecondaryRegion:
    Type: String
    Default: ""
  StreamView:
    Type: String
    Default: NEW_IMAGE
  Keys:
    Type: CommaDelimitedList
    Default: "pk, sk"
Conditions:
  MultiRegion: !Not [!Equals [!Ref SecondaryRegion, ""]]
  SingleRegion: !Not [!Condition MultiRegion]
  Both: !And [!Condition SingleRegion, {"Fn::Equals": ["a", "a"]}]
Resources:
  Other:
    Type: AWS::SQS::Queue
  GT:
    Type: AWS::DynamoDB::GlobalTable
    Condition: MultiRegion
    Properties:
      TableName: !Sub "${AWS::StackName}-gt"
      AttributeDefinitions:
        - {AttributeName: !Select [0, !Ref Keys], AttributeType: S}
      KeySchema:
        - AttributeName: !Select [0, !Ref Keys]
          KeyType: HASH
      StreamSpecification:
        StreamViewType: !Ref StreamView
      TimeToLiveSpecification:
        AttributeName: !If [Both, ttl, other]
        Enabled: true
      Replicas:
        - Region: !Ref AWS::Region
          KMSMasterKeyId: !GetAtt Key.Arn
        - !If [MultiRegion, {Region: !Ref SecondaryRegion}, !Ref AWS::NoValue]
  T:
    Type: AWS::DynamoDB::Table
    Condition: SingleRegion
    Properties:
      AttributeDefinitions:
        - AttributeName: pk
          AttributeType: S
        - AttributeName: sk
          AttributeType: N
      KeySchema:
        - {AttributeName: pk, KeyType: HASH}
        - {AttributeName: sk, KeyType: RANGE}
      ProvisionedThroughput: {ReadCapacityUnits: 3, WriteCapacityUnits: 4}
      LocalSecondaryIndexes:
        - IndexName: lsi
          KeySchema:
            - {AttributeName: pk, KeyType: HASH}
            - {AttributeName: sk, KeyType: RANGE}
          Projection: {ProjectionType: INCLUDE, NonKeyAttributes: [a, b]}
      StreamSpecification: !If [MultiRegion, {StreamViewType: KEYS_ONLY}, !Ref AWS::NoValue]
      SSESpecification:
        KMSMasterKeyId: !ImportValue key
`

func TestDefsIntrinsics(t *testing.T) {
	defs, err := Defs([]byte(condTemplate))
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 2 {
		t.Fatalf("got %d defs", len(defs))
	}
	gt := defs["GT"]
	if gt.Condition != "MultiRegion" || gt.Enabled {
		t.Errorf("GT condition %q enabled=%v", gt.Condition, gt.Enabled)
	}
	if keysOf(gt.KeySchema) != "pk:HASH" || gt.StreamViewType != types.StreamViewTypeNewImage || gt.TTLAttribute != "ttl" {
		t.Errorf("GT = %+v", gt)
	}
	if gt.BillingMode != types.BillingModeProvisioned || *gt.ProvisionedThroughput.ReadCapacityUnits != 5 {
		t.Errorf("GT billing %q %+v", gt.BillingMode, gt.ProvisionedThroughput)
	}
	tt := defs["T"]
	if !tt.Enabled || tt.StreamViewType != "" || tt.BillingMode != types.BillingModeProvisioned ||
		*tt.ProvisionedThroughput.WriteCapacityUnits != 4 || len(tt.LocalSecondaryIndexes) != 1 ||
		tt.LocalSecondaryIndexes[0].Projection.ProjectionType != types.ProjectionTypeInclude ||
		len(tt.LocalSecondaryIndexes[0].Projection.NonKeyAttributes) != 2 {
		t.Errorf("T = %+v", tt)
	}
}

func TestDefsErrors(t *testing.T) {
	for name, tmpl := range map[string]string{
		"getatt in key": `
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: !GetAtt X.Name, KeyType: HASH}]`,
		"no key schema": `
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties: {}`,
		"unknown condition": `
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Condition: Nope
    Properties:
      KeySchema: [{AttributeName: pk, KeyType: HASH}]`,
		"not yaml":     "{",
		"no resources": "A: 1",
	} {
		if _, err := Defs([]byte(tmpl)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	_, err := Defs([]byte(`
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{AttributeName: !GetAtt X.Name, KeyType: HASH}]`))
	var u unresolved
	if !errors.As(err, &u) {
		t.Errorf("want unresolved, got %v", err)
	}
}
