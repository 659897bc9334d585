package regionsim_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// variant is template.yaml with some parameter defaults replaced: what a
// `sam deploy --parameter-overrides ...` of that configuration deploys, in a
// form cfn-lint (which resolves Refs with defaults) and the offline SAM
// transform (scripts/check_sam.py) check as is.
func variant(t *testing.T, overrides map[string]string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dynamotest.RepoRoot(), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	var params *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "Parameters" {
			params = root.Content[i+1]
		}
	}
	seen := map[string]bool{}
	for i := 0; params != nil && i+1 < len(params.Content); i += 2 {
		v, ok := overrides[params.Content[i].Value]
		if !ok {
			continue
		}
		seen[params.Content[i].Value] = true
		p := params.Content[i+1]
		for j := 0; j+1 < len(p.Content); j += 2 {
			if p.Content[j].Value == "Default" {
				p.Content[j+1].Value, p.Content[j+1].Tag, p.Content[j+1].Style = v, "!!str", yaml.DoubleQuotedStyle
			}
		}
	}
	for k := range overrides {
		if !seen[k] {
			t.Fatalf("template.yaml has no parameter %s", k)
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tool(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (needed under CI=true)", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// The multi-region deployment variants of template.yaml pass cfn-lint and
// the offline SAM transform with its least-privilege checks, and a
// replica-region stack creates no global table and no fence table (its
// functions use the home stack's replicated tables by name and the home
// region's FenceTable: env FENCE_TABLE_REGION).
func TestTemplateMultiRegionVariants(t *testing.T) {
	cfnLint, python := tool(t, "cfn-lint"), tool(t, "python3")
	root := dynamotest.RepoRoot()
	variants := []struct {
		name      string
		overrides map[string]string
		home      bool
	}{
		{"single-region", map[string]string{}, true},
		// Operations switched on: alarms notify a topic, X-Ray active, the
		// api function's concurrency reserved, the stage throttled lower.
		{"single-region-paged-traced", map[string]string{"AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:idemkit-pages", "XRayTracing": "Active",
			"ApiReservedConcurrency": "50", "ApiThrottleRateLimit": "200", "ApiThrottleBurstLimit": "400"}, true},
		{"home-reconciled", map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1"}, true},
		{"home-fenced", map[string]string{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1,eu-central-1", "ReplicationLagBoundMs": "0"}, true},
		{"replica-fenced", map[string]string{"CrossRegion": "fenced-effects", "HomeRegion": "eu-west-1", "ReplicationLagBoundMs": "60000",
			"ExistingIdempotencyTable": "idemkit-IdempotencyTable-ABC", "ExistingEffectsTable": "idemkit-EffectsTable-DEF",
			"ExistingRunsTable":  "idemkit-RunsTable-JKL",
			"ExistingFenceTable": "idemkit-FenceTable-GHI", "ExistingIdempotencyStreamLabel": "2026-09-18T12:00:00.000",
			"ExistingEffectsStreamLabel": "2026-09-18T12:00:00.001"}, false},
		{"replica-reconciled", map[string]string{"CrossRegion": "reconciled-records", "HomeRegion": "eu-west-1",
			"ExistingIdempotencyTable": "idemkit-IdempotencyTable-ABC", "ExistingEffectsTable": "idemkit-EffectsTable-DEF",
			"ExistingFenceTable": "idemkit-FenceTable-GHI", "ExistingIdempotencyStreamLabel": "2026-09-18T12:00:00.000",
			"ExistingEffectsStreamLabel": "2026-09-18T12:00:00.001"}, false},
		// MRSC effects table (no TTL: the retention sweeper function is deployed).
		{"home-fenced-strong", map[string]string{"CrossRegion": "fenced-effects", "ReplicaRegions": "us-east-2,us-west-2",
			"EffectsConsistency": "STRONG"}, true},
		{"replica-fenced-strong", map[string]string{"CrossRegion": "fenced-effects", "HomeRegion": "us-east-2", "EffectsConsistency": "STRONG",
			"ExistingIdempotencyTable": "idemkit-IdempotencyTable-ABC", "ExistingEffectsTable": "idemkit-EffectsTable-DEF",
			"ExistingRunsTable":  "idemkit-RunsTable-JKL",
			"ExistingFenceTable": "idemkit-FenceTable-GHI", "ExistingIdempotencyStreamLabel": "2026-09-18T12:00:00.000",
			"ExistingEffectsStreamLabel": "2026-09-18T12:00:00.001"}, false},
	}
	// One cfn-lint and one check_sam.py process check every variant, side
	// by side: each tool's start-up (loading its specifications) costs more
	// than checking one template. Each file is named after its variant, as
	// the tools' output names it.
	dir := t.TempDir()
	bodies := make([][]byte, len(variants))
	paths := make([]string, len(variants))
	for i, v := range variants {
		bodies[i] = variant(t, v.overrides)
		paths[i] = filepath.Join(dir, v.name+".yaml")
		if err := os.WriteFile(paths[i], bodies[i], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checks := []*exec.Cmd{
		exec.Command(cfnLint, paths...),
		exec.Command(python, append([]string{filepath.Join(root, "scripts", "check_sam.py")}, paths...)...),
	}
	outs, errs := make([][]byte, len(checks)), make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = c.CombinedOutput()
		}()
	}
	wg.Wait()
	for i, c := range checks {
		if errs[i] != nil {
			t.Errorf("%s: %v\n%s", strings.Join(c.Args, " "), errs[i], outs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			body := bodies[i]
			defs, err := tables.DefsInRegion(body, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"IdempotencyTable", "EffectsTable", "FenceTable"} {
				if d, ok := defs[id]; !ok || d.Enabled != v.home {
					t.Fatalf("%s created = %v, want %v (home stack)", id, d.Enabled, v.home)
				}
			}
			// MRSC has no TTL (SweeperFunction, Condition StrongEffects,
			// enforces retention: scripts/check_sam.py checks its shape).
			if ttl := defs["EffectsTable"].TTLAttribute; v.home && (ttl == "") != (v.overrides["EffectsConsistency"] == "STRONG") {
				t.Fatalf("EffectsTable TTL attribute %q with EffectsConsistency %q", ttl, v.overrides["EffectsConsistency"])
			}
			for _, id := range []string{"RunsTable", "ApiKeysTable"} { // regional in every stack
				if !defs[id].Enabled {
					t.Fatalf("%s not created", id)
				}
			}
		})
	}
}

// The api function of a fenced deployment is wired for home-pinned Layer 1
// by the template: IDEMPOTENCY_TABLE_REGION (the home region under
// fenced-effects, else empty) and REPLICATION_LAG_BOUND_MS from the
// ReplicationLagBoundMs parameter (0..60000), and its role may reach the
// idempotency table's replica in HomeRegion (replica stack, fenced).
func TestTemplateHomePinnedLayer1(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(dynamotest.RepoRoot(), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	find := func(n *yaml.Node, path ...string) *yaml.Node {
		for _, key := range path {
			var next *yaml.Node
			for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					next = n.Content[i+1]
				}
			}
			if next == nil {
				t.Fatalf("template.yaml has no %v", path)
			}
			n = next
		}
		return n
	}
	dump := func(n *yaml.Node) string {
		b, err := yaml.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	root := doc.Content[0]
	p := find(root, "Parameters", "ReplicationLagBoundMs")
	if find(p, "MinValue").Value != "0" || find(p, "MaxValue").Value != "60000" || find(p, "Type").Value != "Number" {
		t.Fatalf("ReplicationLagBoundMs: %s", dump(p))
	}
	vars := find(root, "Resources", "ApiFunction", "Properties", "Environment", "Variables")
	if got := dump(find(vars, "REPLICATION_LAG_BOUND_MS")); !strings.Contains(got, "!Ref ReplicationLagBoundMs") {
		t.Fatalf("REPLICATION_LAG_BOUND_MS: %s", got)
	}
	if got := dump(find(vars, "IDEMPOTENCY_TABLE_REGION")); !strings.Contains(got, "KitFenced") || !strings.Contains(got, "HomeRegion") {
		t.Fatalf("IDEMPOTENCY_TABLE_REGION: %s", got)
	}
	role := dump(find(root, "Resources", "ApiRole"))
	if !strings.Contains(role, ":dynamodb:${HomeRegion}:${AWS::AccountId}:table/${ExistingIdempotencyTable}") {
		t.Fatalf("ApiRole cannot reach the home region's idempotency replica:\n%s", role)
	}
	// A fenced replica stack's api keeps every run in the home stack's
	// RunsTable (kit.NewKit: HomeClient with RUNS_TABLE_REGION), so a run
	// is read in every region at once.
	for name, want := range map[string]string{"RUNS_TABLE": "ExistingRunsTable", "RUNS_TABLE_REGION": "HomeRegion"} {
		if got := dump(find(vars, name)); !strings.Contains(got, "ReplicaFenced") || !strings.Contains(got, want) {
			t.Fatalf("%s: %s", name, got)
		}
	}
	if !strings.Contains(role, ":dynamodb:${HomeRegion}:${AWS::AccountId}:table/${ExistingRunsTable}") {
		t.Fatalf("ApiRole cannot reach the home region's runs table:\n%s", role)
	}
	// A fenced replica stack's executor writes its effect records in the
	// home region's replica (kit.NewKit: HomeClient with FENCE_TABLE_REGION).
	ex := dump(find(root, "Resources", "ExecutorRole"))
	if !strings.Contains(ex, ":dynamodb:${HomeRegion}:${AWS::AccountId}:table/${ExistingEffectsTable}") {
		t.Fatalf("ExecutorRole cannot reach the home region's effects replica:\n%s", ex)
	}
}

// ReplicaRegions takes at most two regions, the replicas the global tables
// are built with: a third is refused when the stack is deployed (its
// AllowedPattern, with a ConstraintDescription that says so), where a
// list would have let it through and ignored it. A region name is checked
// too (no space, no empty entry).
func TestReplicaRegionsTakesAtMostTwo(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(dynamotest.RepoRoot(), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parameters map[string]struct {
			Type                  string `yaml:"Type"`
			Default               string `yaml:"Default"`
			AllowedPattern        string `yaml:"AllowedPattern"`
			ConstraintDescription string `yaml:"ConstraintDescription"`
		} `yaml:"Parameters"`
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Replicas []yaml.Node `yaml:"Replicas"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	p, ok := doc.Parameters["ReplicaRegions"]
	if !ok {
		t.Fatal("template.yaml has no parameter ReplicaRegions")
	}
	if p.Type != "String" || p.AllowedPattern == "" {
		t.Fatalf("ReplicaRegions: Type %q, AllowedPattern %q; want a String whose pattern bounds the count (a list's pattern checks each member only)", p.Type, p.AllowedPattern)
	}
	if !strings.Contains(p.ConstraintDescription, "at most two") {
		t.Errorf("ReplicaRegions: ConstraintDescription %q does not say it takes at most two regions", p.ConstraintDescription)
	}
	// CloudFormation matches the pattern against the whole value.
	re, err := regexp.Compile("^(?:" + p.AllowedPattern + ")$")
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{
		"":                                 true,
		"eu-west-1":                        true,
		"us-east-2,us-west-2":              true,
		"ap-southeast-2,us-gov-west-1":     true,
		"eu-west-1,eu-central-1,us-east-2": false,
		"eu-west-1, eu-central-1":          false,
		"eu-west-1,":                       false,
		",eu-west-1":                       false,
		"eu-west1":                         false,
		"EU-WEST-1":                        false,
	} {
		if got := re.MatchString(v); got != want {
			t.Errorf("ReplicaRegions=%q accepted = %v, want %v", v, got, want)
		}
	}
	if !re.MatchString(p.Default) {
		t.Errorf("ReplicaRegions: the default %q does not match its own pattern", p.Default)
	}
	// Each global table lists this region and one conditional replica per
	// region the parameter can name.
	for id, r := range doc.Resources {
		if r.Type != "AWS::DynamoDB::GlobalTable" {
			continue
		}
		if n := len(r.Properties.Replicas); n != 3 {
			t.Errorf("%s: %d replicas listed, want 3 (this region and at most two ReplicaRegions)", id, n)
		}
	}
}
