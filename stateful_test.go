package idemkit_test

import (
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
)

// TestStatefulResourcesOutliveTheStack pins what DEPLOYING.md ("The
// records survive the stack") promises of every table of the stack:
// DeletionPolicy and UpdateReplacePolicy Retain (a stack delete, or an
// update that replaces a table, leaves the old table and its records),
// deletion protection and point-in-time recovery on the table and on each
// of a global table's replicas. A table added without them loses every
// record on the first stack delete or replacement.
func TestStatefulResourcesOutliveTheStack(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	tables := append(tp.typesOf("AWS::DynamoDB::Table"), tp.typesOf("AWS::DynamoDB::GlobalTable")...)
	if len(tables) != 5 {
		t.Fatalf("found %d tables %v, want the 5 of DEPLOYING.md", len(tables), tables)
	}
	// replicaSpecs returns the replica mappings of a global table, both
	// the plain ones and the first branch of each !If.
	replicaSpecs := func(p *yaml.Node) []*yaml.Node {
		var out []*yaml.Node
		for _, r := range sequence(get(p, "Replicas")) {
			switch {
			case r.Kind == yaml.MappingNode:
				out = append(out, r)
			case r.Tag == "!If" && len(r.Content) == 3:
				if r.Content[1].Kind == yaml.MappingNode {
					out = append(out, r.Content[1])
				}
			}
		}
		return out
	}
	for _, id := range tables {
		r := tp.resources[id]
		for _, policy := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
			if v := get(r, policy); v == nil || v.Value != "Retain" {
				t.Errorf("%s: %s is not Retain", id, policy)
			}
		}
		p := get(r, "Properties")
		specs := []*yaml.Node{p}
		if tp.types[id] == "AWS::DynamoDB::GlobalTable" {
			specs = replicaSpecs(p)
			if len(specs) != 3 {
				t.Errorf("%s: %d replica specifications, want this region's and two optional ones", id, len(specs))
			}
		}
		for i, s := range specs {
			if v := get(s, "DeletionProtectionEnabled"); v == nil || v.Value != "true" {
				t.Errorf("%s (specification %d): DeletionProtectionEnabled is not true", id, i)
			}
			if v := get(get(s, "PointInTimeRecoverySpecification"), "PointInTimeRecoveryEnabled"); v == nil || v.Value != "true" {
				t.Errorf("%s (specification %d): point-in-time recovery is not enabled", id, i)
			}
		}
	}
}

// TestEveryFunctionLogsIntoItsDeclaredGroup pins DEPLOYING.md's "Logs":
// each function writes its JSON lines into a log group the stack declares,
// /aws/lambda/STACK-FUNCTION (the function's own name), kept
// LogRetentionDays; a function left to Lambda's own group keeps its lines
// forever and outside the stack.
func TestEveryFunctionLogsIntoItsDeclaredGroup(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	fns := tp.typesOf("AWS::Serverless::Function")
	if len(fns) < 5 {
		t.Fatalf("found %d functions", len(fns))
	}
	for _, fn := range fns {
		p := get(tp.resources[fn], "Properties")
		lc := get(p, "LoggingConfig")
		if f := get(lc, "LogFormat"); f == nil || f.Value != "JSON" {
			t.Errorf("%s: LogFormat is not JSON", fn)
		}
		g := get(lc, "LogGroup")
		if g == nil || g.Tag != "!Ref" || tp.types[g.Value] != "AWS::Logs::LogGroup" {
			t.Errorf("%s: LoggingConfig.LogGroup does not name a log group of the stack", fn)
			continue
		}
		gp := get(tp.resources[g.Value], "Properties")
		if r := get(gp, "RetentionInDays"); r == nil || r.Tag != "!Ref" || r.Value != "LogRetentionDays" {
			t.Errorf("%s: RetentionInDays is not LogRetentionDays", g.Value)
		}
		name, group := get(p, "FunctionName"), get(gp, "LogGroupName")
		if name == nil || group == nil || group.Value != "/aws/lambda/"+name.Value {
			t.Errorf("%s: its log group %s is not named /aws/lambda/ + the function's name", fn, g.Value)
		}
		if c, gc := get(tp.resources[fn], "Condition"), get(tp.resources[g.Value], "Condition"); (c == nil) != (gc == nil) || (c != nil && c.Value != gc.Value) {
			t.Errorf("%s and its log group %s are not deployed under the same condition", fn, g.Value)
		}
	}
}
