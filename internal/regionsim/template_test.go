package regionsim_test

import (
	"os"
	"os/exec"
	"path/filepath"
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
		{"home-reconciled", map[string]string{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1"}, true},
		{"home-fenced", map[string]string{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1,eu-central-1"}, true},
		{"replica-fenced", map[string]string{"CrossRegion": "fenced-effects", "HomeRegion": "eu-west-1",
			"ExistingIdempotencyTable": "idemkit-IdempotencyTable-ABC", "ExistingEffectsTable": "idemkit-EffectsTable-DEF",
			"ExistingFenceTable": "idemkit-FenceTable-GHI", "ExistingIdempotencyStreamLabel": "2026-09-18T12:00:00.000",
			"ExistingEffectsStreamLabel": "2026-09-18T12:00:00.001"}, false},
		{"replica-reconciled", map[string]string{"CrossRegion": "reconciled-records", "HomeRegion": "eu-west-1",
			"ExistingIdempotencyTable": "idemkit-IdempotencyTable-ABC", "ExistingEffectsTable": "idemkit-EffectsTable-DEF",
			"ExistingFenceTable": "idemkit-FenceTable-GHI", "ExistingIdempotencyStreamLabel": "2026-09-18T12:00:00.000",
			"ExistingEffectsStreamLabel": "2026-09-18T12:00:00.001"}, false},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			body := variant(t, v.overrides)
			path := filepath.Join(t.TempDir(), "template.yaml")
			if err := os.WriteFile(path, body, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(cfnLint, path).CombinedOutput(); err != nil {
				t.Fatalf("cfn-lint: %v\n%s", err, out)
			}
			cmd := exec.Command(python, filepath.Join(root, "scripts", "check_sam.py"), path)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("check_sam.py: %v\n%s", err, out)
			}
			defs, err := tables.DefsInRegion(body, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"IdempotencyTable", "EffectsTable", "FenceTable"} {
				if d, ok := defs[id]; !ok || d.Enabled != v.home {
					t.Fatalf("%s created = %v, want %v (home stack)", id, d.Enabled, v.home)
				}
			}
			for _, id := range []string{"RunsTable", "ApiKeysTable"} { // regional in every stack
				if !defs[id].Enabled {
					t.Fatalf("%s not created", id)
				}
			}
		})
	}
}
