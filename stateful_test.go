package idemkit_test

import (
	"fmt"
	"strconv"
	"strings"
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

// TestWhatIsKeptCoversEveryStore (RED_TEAM 400): DEPLOYING.md's "What is
// kept, and for how long" has a row for every resource of the stack that
// keeps what its functions wrote: each table, the stream failure queue
// (with the days the template keeps a message: unread, it is then gone and
// its alarm clears) and the functions' log groups (LogRetentionDays).
func TestWhatIsKeptCoversEveryStore(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	doc := deployDoc(t)
	const head = "## What is kept, and for how long\n"
	i := strings.Index(doc, head)
	if i < 0 {
		t.Fatal("docs/DEPLOYING.md has no " + strings.TrimSpace(head))
	}
	section := doc[i+len(head):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	rows := map[string][]string{} // first column -> rows
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, " | "); strings.HasPrefix(line, "| `") && len(cells) >= 4 {
			first := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
			rows[first] = append(rows[first], line)
		}
	}
	tables := append(tp.typesOf("AWS::DynamoDB::Table"), tp.typesOf("AWS::DynamoDB::GlobalTable")...)
	for _, id := range tables {
		if len(rows[id]) == 0 {
			t.Errorf("no row for %s", id)
		}
	}
	queues := tp.typesOf("AWS::SQS::Queue")
	if len(queues) == 0 {
		t.Fatal("no queue in template.yaml: the check proves nothing")
	}
	for _, id := range queues {
		rp := get(get(tp.resources[id], "Properties"), "MessageRetentionPeriod")
		if rp == nil {
			t.Errorf("%s: no MessageRetentionPeriod (SQS's default, 4 days, is not what the docs say)", id)
			continue
		}
		secs, err := strconv.Atoi(rp.Value)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d days", secs/86400)
		if len(rows[id]) == 0 || !strings.Contains(strings.Join(rows[id], "\n"), want) {
			t.Errorf("%s: no row saying it keeps a message %s (MessageRetentionPeriod %d)", id, want, secs)
		}
	}
	logs := false
	for first, rs := range rows {
		if strings.HasPrefix(first, "/aws/lambda/") && strings.Contains(strings.Join(rs, "\n"), "`LogRetentionDays`") {
			logs = true
		}
	}
	if !logs {
		t.Error("no row for the functions' log groups (/aws/lambda/…, kept LogRetentionDays)")
	}
}
