package idemkit_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
)

// evalCond evaluates the template's condition name with the parameters'
// defaults overridden by params (the intrinsics the template's conditions
// use: Equals, Not, And, Or, Condition, Ref, Select, Split, Join).
func (tp tmpl) evalCond(t *testing.T, name string, params map[string]string) bool {
	t.Helper()
	c := tp.conditions[name]
	if c == nil {
		t.Fatalf("no condition %s", name)
	}
	b, ok := tp.eval(t, c, params).(bool)
	if !ok {
		t.Fatalf("condition %s is not a boolean", name)
	}
	return b
}

func (tp tmpl) eval(t *testing.T, n *yaml.Node, params map[string]string) any {
	t.Helper()
	args := func() []any {
		var out []any
		for _, c := range n.Content {
			out = append(out, tp.eval(t, c, params))
		}
		return out
	}
	switch n.Tag {
	case "!Ref":
		if v, ok := params[n.Value]; ok {
			return v
		}
		d := get(tp.params[n.Value], "Default")
		if d == nil {
			t.Fatalf("parameter %s has no default and no value", n.Value)
		}
		return d.Value
	case "!Condition":
		return tp.evalCond(t, n.Value, params)
	case "!Equals":
		a := args()
		return a[0] == a[1]
	case "!Not":
		return !args()[0].(bool)
	case "!And", "!Or":
		and := n.Tag == "!And"
		for _, a := range args() {
			if a.(bool) != and {
				return !and
			}
		}
		return and
	case "!Join":
		a := args()
		var parts []string
		for _, p := range a[1].([]any) {
			parts = append(parts, p.(string))
		}
		return strings.Join(parts, a[0].(string))
	case "!Split":
		a := args()
		var out []any
		for _, p := range strings.Split(a[1].(string), a[0].(string)) {
			out = append(out, p)
		}
		return out
	case "!Select":
		a := args()
		i, err := strconv.Atoi(a[0].(string))
		if err != nil {
			t.Fatal(err)
		}
		return a[1].([]any)[i]
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value
	case yaml.SequenceNode:
		return args()
	}
	t.Fatalf("cannot evaluate %v at line %d", n.Tag, n.Line)
	return nil
}

// alarmCost counts the alarms a stack deployed with params creates and the
// metrics they watch (CloudWatch bills an alarm per metric it reads: each
// metric of a math expression counts).
func (tp tmpl) alarmCost(t *testing.T, params map[string]string) (alarms, metrics int) {
	t.Helper()
	for _, id := range tp.typesOf("AWS::CloudWatch::Alarm") {
		r := tp.resources[id]
		if c := get(r, "Condition"); c != nil && !tp.evalCond(t, c.Value, params) {
			continue
		}
		alarms++
		// A term an !If includes in some postures only (RED_TEAM 422)
		// is billed where it is deployed.
		p := tp.resolveIfs(t, get(r, "Properties"), params)
		if get(p, "MetricName") != nil {
			metrics++
		}
		for _, m := range sequence(get(p, "Metrics")) {
			if get(m, "MetricStat") != nil {
				metrics++
			}
		}
	}
	return alarms, metrics
}

// TestIdleCostIsTheTemplates: DEPLOYING.md's idle cost of a single-region
// stack (the parameters' defaults) names the alarms the template creates
// and the metrics they watch, at $0.10 a metric a month.
func TestIdleCostIsTheTemplates(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	alarms, metrics := tp.alarmCost(t, nil)
	doc := deployDoc(t)
	want := fmt.Sprintf("has %d alarms watching %d metrics", alarms, metrics)
	if !strings.Contains(strings.Join(strings.Fields(doc), " "), want) {
		t.Errorf("docs/DEPLOYING.md's idle cost does not say the single-region stack %s", want)
	}
	if price := fmt.Sprintf("about $%.2f;", float64(metrics)/10); !strings.Contains(strings.Join(strings.Fields(doc), " "), price) {
		t.Errorf("docs/DEPLOYING.md's idle cost does not say %q ($0.10 a month a metric)", price)
	}
	// The table of alarms per posture (RED_TEAM 399): each row is what
	// the template deploys with those parameters.
	replica := map[string]string{"CrossRegion": "fenced-effects", "HomeRegion": "eu-west-1",
		"ExistingIdempotencyTable": "idem", "ExistingEffectsTable": "effects", "ExistingFenceTable": "fence", "ExistingRunsTable": "runs",
		"ExistingIdempotencyStreamLabel": "2026-01-01T00:00:00.000", "ExistingEffectsStreamLabel": "2026-01-01T00:00:00.000"}
	for label, params := range map[string]map[string]string{
		"`single-region`":                                       nil,
		"`single-region`, `STRONG`":                             {"EffectsConsistency": "STRONG"},
		"`reconciled-records`, replica region":                  {"CrossRegion": "reconciled-records", "HomeRegion": "eu-west-1", "ExistingIdempotencyTable": "idem", "ExistingEffectsTable": "effects", "ExistingIdempotencyStreamLabel": "2026-01-01T00:00:00.000", "ExistingEffectsStreamLabel": "2026-01-01T00:00:00.000"},
		"`reconciled-records`, home, one replica region":        {"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1"},
		"`reconciled-records`, home, two replica regions":       {"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1,eu-central-1"},
		"`fenced-effects`, home, one replica region":            {"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1"},
		"`fenced-effects`, home, two replica regions":           {"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1,eu-central-1"},
		"`fenced-effects`, home, two replica regions, `STRONG`": {"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1,eu-central-1", "EffectsConsistency": "STRONG"},
		"`fenced-effects`, replica region":                      replica,
	} {
		a, m := tp.alarmCost(t, params)
		if row := fmt.Sprintf("| %s | %d | %d | $%.2f |", label, a, m, float64(m)/10); !strings.Contains(doc, row) {
			t.Errorf("docs/DEPLOYING.md's alarms per posture has no row %q", row)
		}
	}
}
