package archtest

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// layers is the layering of the module's top-level packages, from the
// ground up. A package may import only packages of a lower layer: an import
// of its own layer or of one above it is an arrow that runs back up (and
// the only way a cycle between top-level packages could form). "." is the
// module's root package (the embedded template.yaml).
//
//   - 0: the root package and tools: data only (the embedded template.yaml,
//     and the engines' pinned lockfile).
//   - 1: internal/...: the ground utilities (canonical JSON, identifiers,
//     clocks, key hashes, emulators, table creation); no library, host or
//     CLI code.
//   - 2: the libraries users import: idem, ledger, client, emf. None of
//     them imports another.
//   - 3: what is built on the libraries: the reference host (functions,
//     with its local stack functions/devstack, which the CLI's dev command,
//     the benchmarks and the end-to-end tests start) and the examples.
//   - 4: the tools at the top: the CLI (cmd), the benchmarks (bench), the
//     end-to-end tests (e2e).
var layers = [][]string{
	{".", "tools"},
	{"internal"},
	{"idem", "ledger", "client", "emf"},
	{"functions", "examples"},
	{"cmd", "bench", "e2e"},
}

// groundFloorForbidden are the top-level packages no internal/... package
// imports outside its tests: the ground floor is built on by the libraries,
// the host and the CLI, never the other way round.
var groundFloorForbidden = []string{"idem", "ledger", "client", "emf", "functions", "cmd", "bench", "examples", "e2e"}

// topLevel names the top-level package of the module package path p ("."
// for the root package), or "" if p is not in the module.
func topLevel(p string) string {
	root := strings.TrimSuffix(module, "/")
	if p == root {
		return "."
	}
	if !strings.HasPrefix(p, module) {
		return ""
	}
	return strings.SplitN(strings.TrimPrefix(p, module), "/", 2)[0]
}

// imports lists, for every package of the module, the module packages its
// non-test files import directly.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = shared.ModuleRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var own []string
		for _, d := range f[1:] {
			if topLevel(d) != "" {
				own = append(own, d)
			}
		}
		m[f[0]] = own
	}
	return m
}

// groundFloorViolations lists the imports of an internal/... package of a
// package under one of the forbidden top-level packages.
func groundFloorViolations(imports map[string][]string, forbidden []string) []string {
	var bad []string
	for pkg, ds := range imports {
		if topLevel(pkg) != "internal" {
			continue
		}
		for _, d := range ds {
			for _, f := range forbidden {
				if topLevel(d) == f {
					bad = append(bad, fmt.Sprintf("%s imports %s", strings.TrimPrefix(pkg, module), strings.TrimPrefix(d, module)))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// backArrows lists what breaks the layering: a top-level package that no
// layer names, and every import between top-level packages that does not
// run strictly down (same layer or a layer above).
func backArrows(layers [][]string, imports map[string][]string) []string {
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layer[p] = i
		}
	}
	var bad []string
	unlisted := map[string]bool{}
	edges := map[string]bool{}
	for pkg, ds := range imports {
		from := topLevel(pkg)
		lf, ok := layer[from]
		if !ok {
			unlisted[from] = true
			continue
		}
		for _, d := range ds {
			to := topLevel(d)
			if to == from {
				continue
			}
			lt, ok := layer[to]
			if !ok {
				unlisted[to] = true
				continue
			}
			if lt >= lf {
				edges[fmt.Sprintf("%s (layer %d) imports %s (layer %d), first seen as %s -> %s", from, lf, to, lt,
					strings.TrimPrefix(pkg, module), strings.TrimPrefix(d, module))] = true
			}
		}
	}
	for u := range unlisted {
		bad = append(bad, fmt.Sprintf("top-level package %q is in no layer: add it to layers", u))
	}
	// One line per top-level arrow: keep the alphabetically first example.
	seen := map[string]bool{}
	var es []string
	for e := range edges {
		es = append(es, e)
	}
	sort.Strings(es)
	for _, e := range es {
		key := e[:strings.Index(e, ", first seen")]
		if !seen[key] {
			seen[key] = true
			bad = append(bad, e)
		}
	}
	sort.Strings(bad)
	return bad
}

// TestInternalIsTheGroundFloor: no non-test file under internal/ imports a
// library (idem, ledger, client, emf), the reference host (functions) or a
// tool; code that needs them lives next to its one user (the conformance
// checker under cmd/idemkit/internal, the work-order contract under
// functions/host, the conflict auditor under functions/auditor). Tests of
// internal packages may drive the real libraries and host.
func TestInternalIsTheGroundFloor(t *testing.T) {
	for _, v := range groundFloorViolations(imports(t), groundFloorForbidden) {
		t.Errorf("%s: internal/... is the ground floor and imports no library, host or tool package", v)
	}
}

// TestTopLevelLayersHaveNoBackArrows: between the module's top-level
// packages every import runs down the layers; none runs sideways or back
// up, so there is no cycle.
func TestTopLevelLayersHaveNoBackArrows(t *testing.T) {
	for _, v := range backArrows(layers, imports(t)) {
		t.Errorf("%s: an import must run down the layers", v)
	}
}

// TestLayerChecksCatchViolations runs both checks on a synthetic import
// graph holding each kind of violation, so a check that stopped seeing
// them would fail here.
func TestLayerChecksCatchViolations(t *testing.T) {
	g := map[string][]string{
		module + "internal/a":   {module + "idem", module + "internal/b"},
		module + "internal/b":   {module + "functions/host/x"},
		module + "idem":         {module + "internal/a", module + "ledger"},
		module + "ledger":       {module + "internal/a"},
		module + "functions/x":  {module + "idem", module + "cmd/y"},
		module + "cmd/y":        {module + "functions/x"},
		module + "newtop/z":     {module + "internal/a"},
		module + "examples/ok":  {module + "idem"},
		module + "internal/ok2": {module + "internal/a"},
	}
	got := groundFloorViolations(g, groundFloorForbidden)
	want := []string{"internal/a imports idem", "internal/b imports functions/host/x"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("groundFloorViolations = %q, want %q", got, want)
	}
	got = backArrows(layers, g)
	wantPrefixes := []string{
		"functions (layer 3) imports cmd (layer 4)", // back up, and with cmd -> functions a cycle
		"idem (layer 2) imports ledger (layer 2)",   // sideways
		"internal (layer 1) imports functions (layer 3)",
		"internal (layer 1) imports idem (layer 2)",
		`top-level package "newtop" is in no layer`,
	}
	if len(got) != len(wantPrefixes) {
		t.Fatalf("backArrows = %q, want %d lines starting %q", got, len(wantPrefixes), wantPrefixes)
	}
	for i, w := range wantPrefixes {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("backArrows[%d] = %q, want it to start %q", i, got[i], w)
		}
	}
}
