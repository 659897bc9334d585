package tables_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// RED_TEAM 515: every table of template.yaml (a global table's replica in
// the stack's region) and of the snippets docs/DEPLOYING.md shows has
// deletion protection, read into Def.DeletionProtection; Check reports a
// deployed table without it as a difference naming the command that turns
// it on, and a table with it, or a template without it, as no difference.
// Before, Check never read DeletionProtectionEnabled: a table one
// delete-table call could remove was ok.
func TestCheckDeletionProtection(t *testing.T) {
	for _, params := range []map[string]string{nil, {"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1"}} {
		defs, err := tables.EmbeddedWithParameters(params)
		if err != nil {
			t.Fatal(err)
		}
		for id, d := range defs {
			if !d.DeletionProtection {
				t.Errorf("template.yaml %v: %s read without deletion protection", params, id)
			}
			// Each replica's own settings (RED_TEAM 516).
			for _, region := range d.ReplicaRegions {
				if rs := d.ReplicaSettings[region]; !rs.DeletionProtection || !rs.PointInTimeRecovery {
					t.Errorf("template.yaml %v: %s's replica in %s read as %+v, want deletion protection and point-in-time recovery", params, id, region, rs)
				}
			}
		}
	}
	for _, f := range []string{"idempotency-table.yaml", "effects-table.yaml"} {
		b, err := os.ReadFile(filepath.Join(dynamotest.RepoRoot(), "docs", f))
		if err != nil {
			t.Fatal(err)
		}
		defs, err := tables.Defs(b)
		if err != nil {
			t.Fatal(err)
		}
		for id, d := range defs {
			if !d.DeletionProtection {
				t.Errorf("docs/%s: %s read without deletion protection", f, id)
			}
		}
	}

	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"IdempotencyTable", "RunsTable"} { // a global table and a table
		d := defs[id]
		d.TTLAttribute = "expiresAt" // as describeOnly answers
		for _, tc := range []struct {
			name      string
			protected *bool
			template  bool
			want      string // the one difference, "" none
		}{
			{"protected", aws.Bool(true), true, ""},
			{"turned off", aws.Bool(false), true, "deletion protection: disabled (template: enabled; one delete-table call removes the table and every record in it); turn it on: aws dynamodb update-table --table-name orders-t --region us-east-1 --deletion-protection-enabled"},
			{"not reported", nil, true, "deletion protection: disabled"},
			{"template without it", aws.Bool(false), false, ""},
		} {
			t.Run(id+"/"+tc.name, func(t *testing.T) {
				d := d
				d.DeletionProtection = tc.template
				table := asTemplate(d, "orders-t")
				table.DeletionProtectionEnabled = tc.protected
				r, err := tables.Check(context.Background(), describeOnly{table}, d, "orders-t")
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
}

// Deletion protection does not shape a table: a template whose value
// needs an intrinsic not evaluated here (an import) is read, the
// protection left uncompared, as CreateTable's properties would be.
func TestDefsDeletionProtectionUnresolved(t *testing.T) {
	const tmpl = `
Parameters:
  Protect: {Type: String, Default: "true"}
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      DeletionProtectionEnabled: !ImportValue protect-tables
  P:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      DeletionProtectionEnabled: !Ref Protect
`
	defs, err := tables.Defs([]byte(tmpl))
	if err != nil {
		t.Fatalf("Defs: %v", err)
	}
	if defs["T"].DeletionProtection || !defs["P"].DeletionProtection {
		t.Errorf("T %v (an import: uncompared), P %v (the parameter's \"true\")", defs["T"].DeletionProtection, defs["P"].DeletionProtection)
	}
}
