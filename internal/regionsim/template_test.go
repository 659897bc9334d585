package regionsim_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
		{"replica-reconciled-three-regions", map[string]string{"CrossRegion": "reconciled-records", "HomeRegion": "eu-west-1",
			"OtherReplicaRegion":       "eu-central-1",
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
			// MRSC has no TTL, nor has a fenced-effects effects table in any
			// replica (SweeperFunction, Condition Swept, enforces retention:
			// scripts/check_sam.py checks its shape).
			noTTL := v.overrides["EffectsConsistency"] == "STRONG" || v.overrides["CrossRegion"] == "fenced-effects"
			if ttl := defs["EffectsTable"].TTLAttribute; v.home && (ttl == "") != noTTL {
				t.Fatalf("EffectsTable TTL attribute %q with EffectsConsistency %q, CrossRegion %q", ttl, v.overrides["EffectsConsistency"], v.overrides["CrossRegion"])
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
	// 0..60000 whole milliseconds: a String whose pattern is that range
	// (a Number would take "2000.5", which the functions refuse at start-up:
	// RED_TEAM 401).
	if find(p, "Type").Value != "String" {
		t.Fatalf("ReplicationLagBoundMs: %s", dump(p))
	}
	lag := regexp.MustCompile(`^(?:` + find(p, "AllowedPattern").Value + `)$`)
	for v, want := range map[string]bool{"0": true, "2000": true, "60000": true, "60001": false, "-1": false, "2000.5": false, "": false} {
		if lag.MatchString(v) != want {
			t.Fatalf("ReplicationLagBoundMs %q allowed = %v, want %v: %s", v, !want, want, dump(p))
		}
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

// The retention sweeper per posture: IdempotencyTable and EffectsTable have
// TTL except under fenced-effects (a TTL delete in another replica
// replicates onto the home region's record:
// TestLayer1HomePinnedTTLDeleteFromAReplica,
// TestEffectFencedReplicaTTLDeleteFromAReplica), and EffectsTable none when
// MRSC; the sweeper function is deployed exactly where a table it can sweep
// has no TTL, sweeping (its environment) and granted dynamodb:Scan and
// dynamodb:DeleteItem on (its role) exactly those tables: EffectsTable when
// it is MRSC (EffectsConsistency STRONG) or in a fenced-effects home stack,
// IdempotencyTable in a
// fenced-effects home stack whose Layer-1 retention is finite (under a
// retention of forever nothing may delete a record, and the sweeper would
// refuse the table). The template is evaluated with each configuration's
// parameters, as CloudFormation would.
func TestTemplateSweeperPerPosture(t *testing.T) {
	const (
		eff  = "EffectsTable"
		idem = "IdempotencyTable"
	)
	replica := map[string]string{"HomeRegion": "eu-west-1", "ExistingIdempotencyTable": "idemkit-IdempotencyTable-ABC",
		"ExistingEffectsTable": "idemkit-EffectsTable-DEF", "ExistingRunsTable": "idemkit-RunsTable-JKL", "ExistingFenceTable": "idemkit-FenceTable-GHI",
		"ExistingIdempotencyStreamLabel": "2026-09-18T12:00:00.000", "ExistingEffectsStreamLabel": "2026-09-18T12:00:00.001"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		if m == nil {
			m = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name      string
		overrides map[string]string
		idemTTL   bool     // IdempotencyTable (home stacks only) has TTL
		effTTL    bool     // EffectsTable (home stacks only) has TTL
		swept     []string // the tables the sweeper sweeps; none: not deployed
	}{
		{"single-region", nil, true, true, nil},
		{"single-region-strong", with(nil, "EffectsConsistency", "STRONG"), true, false, []string{eff}},
		{"home-reconciled", with(nil, "CrossRegion", "reconciled-records", "ReplicaRegions", "eu-west-1"), true, true, nil},
		{"replica-reconciled", with(replica, "CrossRegion", "reconciled-records", "ExistingRunsTable", ""), false, false, nil},
		// fenced-effects: neither replicated table keeps TTL in a home stack
		// (RED_TEAM 76 for IdempotencyTable, 480 for EffectsTable), and its
		// sweeper deletes their expired records (the idempotency table's
		// unless its retention is forever).
		{"home-fenced", with(nil, "CrossRegion", "fenced-effects", "ReplicaRegions", "eu-west-1"), false, false, []string{eff, idem}},
		{"home-fenced-erp-720h", with(nil, "CrossRegion", "fenced-effects", "IdempotencyPolicy", "erp", "RetentionHours", "720"), false, false, []string{eff, idem}},
		{"home-fenced-commerce-48h", with(nil, "CrossRegion", "fenced-effects", "IdempotencyPolicy", "commerce", "RetentionHours", "48"), false, false, []string{eff, idem}},
		{"home-fenced-commerce-forever", with(nil, "CrossRegion", "fenced-effects", "IdempotencyPolicy", "commerce"), false, false, []string{eff}},
		{"home-fenced-forever", with(nil, "CrossRegion", "fenced-effects", "RetentionHours", "forever"), false, false, []string{eff}},
		{"home-fenced-0", with(nil, "CrossRegion", "fenced-effects", "IdempotencyPolicy", "erp", "RetentionHours", "0"), false, false, []string{eff}},
		{"home-fenced-strong", with(nil, "CrossRegion", "fenced-effects", "ReplicaRegions", "us-east-2,us-west-2", "EffectsConsistency", "STRONG"), false, false, []string{eff, idem}},
		{"replica-fenced", with(replica, "CrossRegion", "fenced-effects"), false, false, nil},
		{"replica-fenced-strong", with(replica, "CrossRegion", "fenced-effects", "EffectsConsistency", "STRONG"), false, false, []string{eff}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := variant(t, c.overrides)
			conds, err := tables.Conditions(body, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			defs, err := tables.DefsInRegion(body, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			if d := defs[idem]; d.Enabled && (d.TTLAttribute != "") != c.idemTTL {
				t.Errorf("IdempotencyTable TTL attribute %q, want TTL %v", d.TTLAttribute, c.idemTTL)
			}
			if d := defs[eff]; d.Enabled && (d.TTLAttribute != "") != c.effTTL {
				t.Errorf("EffectsTable TTL attribute %q, want TTL %v", d.TTLAttribute, c.effTTL)
			}
			var doc yaml.Node
			if err := yaml.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			resources := mapGet(doc.Content[0], "Resources")
			deployed := func(id string) bool {
				r := mapGet(resources, id)
				if r == nil {
					t.Fatalf("template.yaml has no %s", id)
				}
				cn := mapGet(r, "Condition")
				return cn == nil || conds[cn.Value]
			}
			want := len(c.swept) > 0
			for _, id := range []string{"SweeperFunction", "SweeperRole", "SweeperLogGroup", "SweeperErrorsAlarm"} {
				if deployed(id) != want {
					t.Errorf("%s deployed %v, want %v", id, deployed(id), want)
				}
			}
			for id, tb := range map[string]string{"SweeperIncompleteAlarm": eff, "SweeperIdempotencyIncompleteAlarm": idem} {
				if got := deployed(id); got != slices.Contains(c.swept, tb) {
					t.Errorf("%s deployed %v, want it exactly when %s is swept", id, got, tb)
				}
			}
			if !want {
				return
			}
			// The tables the function sweeps: its *_TABLE variables.
			vars := evalIf(t, conds, mapGet(mapGet(mapGet(mapGet(resources, "SweeperFunction"), "Properties"), "Environment"), "Variables"))
			var env []string
			for k, tb := range map[string]string{"EFFECTS_TABLE": eff, "IDEMPOTENCY_TABLE": idem, "FENCE_TABLE": "FenceTable"} {
				if mapGet(vars, k) != nil {
					env = append(env, tb)
				}
			}
			slices.Sort(env)
			if !slices.Equal(env, c.swept) {
				t.Errorf("the sweeper's environment names %v, want %v", env, c.swept)
			}
			if slices.Contains(c.swept, idem) {
				for _, k := range []string{"IDEMPOTENCY_POLICY", "IDEMPOTENCY_RETENTION_HOURS"} {
					if mapGet(vars, k) == nil {
						t.Errorf("the sweeper sweeps IdempotencyTable without %s (its refusal of a retention of forever needs it)", k)
					}
				}
			}
			// The tables its role may touch, and how.
			role := evalIf(t, conds, mapGet(resources, "SweeperRole"))
			granted := map[string][]string{}
			var walk func(n *yaml.Node)
			walk = func(n *yaml.Node) {
				if act, rsc := mapGet(n, "Action"), mapGet(n, "Resource"); act != nil && rsc != nil {
					var acts []string
					for _, a := range act.Content {
						if strings.HasPrefix(a.Value, "dynamodb:") {
							acts = append(acts, a.Value)
						}
					}
					if len(acts) > 0 {
						tb := tableOf(t, rsc)
						granted[tb] = append(granted[tb], acts...)
					}
				}
				for _, ch := range n.Content {
					walk(ch)
				}
			}
			walk(role)
			if got := slices.Sorted(maps.Keys(granted)); !slices.Equal(got, c.swept) {
				t.Errorf("SweeperRole grants DynamoDB actions on %v, want %v", got, c.swept)
			}
			for tb, acts := range granted {
				slices.Sort(acts)
				if !slices.Equal(acts, []string{"dynamodb:DeleteItem", "dynamodb:Scan"}) {
					t.Errorf("SweeperRole grants %v on %s, want Scan and DeleteItem only", acts, tb)
				}
			}
		})
	}
}

// mapGet is the value of key in mapping n, nil when absent.
func mapGet(n *yaml.Node, key string) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// evalIf returns a copy of n with every !If resolved by conds and every
// value that resolves to !Ref AWS::NoValue dropped (nil when n itself is).
func evalIf(t *testing.T, conds map[string]bool, n *yaml.Node) *yaml.Node {
	t.Helper()
	if n == nil || (n.Tag == "!Ref" && n.Value == "AWS::NoValue") {
		return nil
	}
	if n.Tag == "!If" {
		if len(n.Content) != 3 {
			t.Fatalf("malformed !If at line %d", n.Line)
		}
		v, ok := conds[n.Content[0].Value]
		if !ok {
			t.Fatalf("!If on unknown condition %q", n.Content[0].Value)
		}
		if v {
			return evalIf(t, conds, n.Content[1])
		}
		return evalIf(t, conds, n.Content[2])
	}
	out := *n
	out.Content = nil
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := evalIf(t, conds, n.Content[i+1]); v != nil {
				out.Content = append(out.Content, n.Content[i], v)
			}
		}
	default:
		for _, c := range n.Content {
			if v := evalIf(t, conds, c); v != nil {
				out.Content = append(out.Content, v)
			}
		}
	}
	return &out
}

// tableOf is the logical table a resolved IAM Resource names: !GetAtt
// X.Arn, or an ARN built from ExistingX (a replica stack's name of the
// home stack's X).
func tableOf(t *testing.T, rsc *yaml.Node) string {
	t.Helper()
	switch {
	case rsc.Tag == "!GetAtt" && strings.HasSuffix(rsc.Value, ".Arn"):
		return strings.TrimSuffix(rsc.Value, ".Arn")
	case rsc.Tag == "!Sub":
		if m := regexp.MustCompile(`:table/\$\{Existing(\w+)\}$`).FindStringSubmatch(rsc.Value); m != nil {
			return m[1]
		}
	}
	t.Fatalf("IAM resource %s %q: not one table", rsc.Tag, rsc.Value)
	return ""
}

// TestReplicationLagAlarmsCoverEveryRegionPair: ReplicationLatency is
// published in the region a write replicates from, per receiving region,
// so an alarm on it lives in the sending region's stack. Under
// reconciled-records every region takes writes and a replay resolves in
// another region only after replication: replication between any two
// regions, in either direction, breaks the promise when slow, so across
// the stacks of a deployment every ordered pair of its regions is watched,
// on both global tables. Under fenced-effects only the home region writes,
// so its replication to each other region is watched.
func TestReplicationLagAlarmsCoverEveryRegionPair(t *testing.T) {
	const home, r1, r2 = "us-east-1", "eu-west-1", "eu-central-1"
	replica := func(posture, region, other string) map[string]string {
		m := map[string]string{"CrossRegion": posture, "HomeRegion": home,
			"ExistingIdempotencyTable": "idemkit-IdempotencyTable-ABC", "ExistingEffectsTable": "idemkit-EffectsTable-DEF",
			"ExistingFenceTable": "idemkit-FenceTable-GHI", "ExistingIdempotencyStreamLabel": "2026-09-18T12:00:00.000",
			"ExistingEffectsStreamLabel": "2026-09-18T12:00:00.001"}
		if posture == "fenced-effects" {
			m["ExistingRunsTable"] = "idemkit-RunsTable-JKL"
		}
		if other != "" {
			m["OtherReplicaRegion"] = other
		}
		return m
	}
	type stack struct {
		region    string
		overrides map[string]string
	}
	for _, tc := range []struct {
		name   string
		stacks []stack
		want   []string // "from>to", for each table
	}{
		{"reconciled, two regions", []stack{
			{home, map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": r1}},
			{r1, replica("reconciled-records", r1, "")},
		}, []string{home + ">" + r1, r1 + ">" + home}},
		{"reconciled, three regions", []stack{
			{home, map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": r1 + "," + r2}},
			{r1, replica("reconciled-records", r1, r2)},
			{r2, replica("reconciled-records", r2, r1)},
		}, []string{home + ">" + r1, home + ">" + r2, r1 + ">" + home, r1 + ">" + r2, r2 + ">" + home, r2 + ">" + r1}},
		{"fenced, three regions", []stack{
			{home, map[string]string{"CrossRegion": "fenced-effects", "ReplicaRegions": r1 + "," + r2}},
			{r1, replica("fenced-effects", r1, "")},
			{r2, replica("fenced-effects", r2, "")},
		}, []string{home + ">" + r1, home + ">" + r2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]string{}
			for _, s := range tc.stacks {
				for table, pairs := range lagAlarmPairs(t, s.region, s.overrides) {
					got[table] = append(got[table], pairs...)
				}
			}
			for _, table := range []string{"IdempotencyTable", "EffectsTable"} {
				watched := got[table]
				for _, p := range tc.want {
					if !slices.Contains(watched, p) {
						t.Errorf("%s: no ReplicationLatency alarm watches %s (watched: %v)", table, p, watched)
					}
				}
			}
		})
	}
}

// lagAlarmPairs deploys template.yaml with overrides in region and returns,
// per logical table, the "from>to" region pairs its ReplicationLatency
// alarms watch (from: the stack's region; to: ReceivingRegion).
func lagAlarmPairs(t *testing.T, region string, overrides map[string]string) map[string][]string {
	t.Helper()
	body := variant(t, overrides)
	conds, err := tables.Conditions(body, region)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"AWS::Region": region}
	ps := mapGet(doc.Content[0], "Parameters")
	for i := 0; i+1 < len(ps.Content); i += 2 {
		if d := mapGet(ps.Content[i+1], "Default"); d != nil {
			params[ps.Content[i].Value] = d.Value
		}
	}
	// Any condition tables.Conditions leaves out (one on an intrinsic it
	// cannot evaluate): evaluate it here.
	cs := mapGet(doc.Content[0], "Conditions")
	var cond func(name string) bool
	var eval func(n *yaml.Node) bool
	eval = func(n *yaml.Node) bool {
		switch n.Tag {
		case "!Equals":
			return cfnString(t, params, n.Content[0]) == cfnString(t, params, n.Content[1])
		case "!Not":
			return !eval(n.Content[0])
		case "!And", "!Or":
			for _, c := range n.Content {
				if eval(c) != (n.Tag == "!And") {
					return n.Tag == "!Or"
				}
			}
			return n.Tag == "!And"
		case "!Condition":
			return cond(n.Value)
		}
		t.Fatalf("condition: cannot evaluate %s", n.Tag)
		return false
	}
	cond = func(name string) bool {
		if v, ok := conds[name]; ok {
			return v
		}
		n := mapGet(cs, name)
		if n == nil {
			t.Fatalf("no condition %s", name)
		}
		conds[name] = eval(n)
		return conds[name]
	}
	for i := 0; i+1 < len(cs.Content); i += 2 {
		cond(cs.Content[i].Value)
	}
	resources := mapGet(doc.Content[0], "Resources")
	out := map[string][]string{}
	for i := 0; i+1 < len(resources.Content); i += 2 {
		r := resources.Content[i+1]
		if v := mapGet(r, "Type"); v == nil || v.Value != "AWS::CloudWatch::Alarm" {
			continue
		}
		if cn := mapGet(r, "Condition"); cn != nil && !conds[cn.Value] {
			continue
		}
		props := evalIf(t, conds, mapGet(r, "Properties"))
		if m := mapGet(props, "MetricName"); m == nil || m.Value != "ReplicationLatency" {
			continue
		}
		var table, to string
		for _, d := range mapGet(props, "Dimensions").Content {
			v := mapGet(d, "Value")
			switch mapGet(d, "Name").Value {
			case "TableName":
				switch {
				case v.Tag == "!Ref" && strings.HasPrefix(v.Value, "Existing"):
					table = strings.TrimPrefix(v.Value, "Existing")
				case v.Tag == "!Ref":
					table = v.Value
				case v.Tag == "!Sub" && strings.HasPrefix(v.Value, "${Existing") && strings.HasSuffix(v.Value, "}"):
					table = strings.TrimSuffix(strings.TrimPrefix(v.Value, "${Existing"), "}")
				}
			case "ReceivingRegion":
				to = cfnString(t, params, v)
			}
		}
		if table == "" || to == "" {
			t.Fatalf("%s: ReplicationLatency alarm on table %q, receiving region %q", resources.Content[i].Value, table, to)
		}
		out[table] = append(out[table], region+">"+to)
	}
	return out
}

// cfnString evaluates the string intrinsics an alarm dimension uses
// (!Ref of a parameter, !Select, !Split, !Join; !If already resolved).
func cfnString(t *testing.T, params map[string]string, n *yaml.Node) string {
	t.Helper()
	list := func(n *yaml.Node) []string {
		if n.Tag == "!Split" {
			return strings.Split(cfnString(t, params, n.Content[1]), n.Content[0].Value)
		}
		var out []string
		for _, c := range n.Content {
			out = append(out, cfnString(t, params, c))
		}
		return out
	}
	switch n.Tag {
	case "!Ref":
		v, ok := params[n.Value]
		if !ok {
			t.Fatalf("!Ref %s: no such parameter", n.Value)
		}
		return v
	case "!Select":
		i, err := strconv.Atoi(n.Content[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		l := list(n.Content[1])
		if i >= len(l) {
			t.Fatalf("!Select %d of %v", i, l)
		}
		return l[i]
	case "!Join":
		return strings.Join(list(n.Content[1]), n.Content[0].Value)
	case "!Sub", "!GetAtt":
		t.Fatalf("cannot evaluate %s %q", n.Tag, n.Value)
	}
	return n.Value
}
