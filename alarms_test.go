package idemkit_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/ledger"
)

// The packages whose code emits EMF metrics (through a Metrics interface
// that *emf.Recorder implements), relative to the module root.
// TestEveryMetricEmitterIsRead fails when a package outside this list
// declares a Metric… constant, so a new emitter cannot be missed.
var emitterDirs = []string{
	"idem",
	"ledger",
	"ledger/fence",
	"functions/auditor/auditfn",
	"functions/auditor/conflictaudit",
	"functions/executor/execfn",
	"functions/sweeper/sweepfn",
	"functions/authorizer/authfn",
	"functions/host/kit",
}

// valueDirs hold constants an emitter uses as dimension values (the ledger's
// "kind" is an identity.Kind).
var valueDirs = []string{"ledger/identity"}

const modulePath = "github.com/idemkit/idemkit/"

// emitted is what the code writes: for each metric name, the dimension
// name sets it is written with (each sorted and comma-joined; "" for none),
// and every string constant of the emitting packages (the dimension values
// an alarm may name).
type emitted struct {
	dims   map[string]map[string]bool
	values map[string]bool
}

// readEmitted reads the metrics the code emits from the code itself: every
// call NAME(metric, n, dims) of a method Count or Milliseconds in the
// non-test files of emitterDirs, the metric resolved through the package's
// constants (or, in a helper that takes the name as a parameter, through
// the helper's callers; or the keys of the map literal a range loop walks),
// the dimension names from the map literal passed, or from the literals
// assigned to the dims variable plus the keys set on it (each optional).
func readEmitted(t *testing.T, root string) emitted {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string][]*ast.File{}
	consts := map[string]map[string]string{} // dir -> const name -> value
	for _, dir := range append(slices.Clone(emitterDirs), valueDirs...) {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		consts[dir] = map[string]string{}
		for _, m := range matches {
			if strings.HasSuffix(m, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, m, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files[dir] = append(files[dir], f)
		}
	}
	// Constants: string literals, or another package's constant (resolved
	// once that package's are known: a few passes).
	for range 3 {
		for dir, fs := range files {
			for _, f := range fs {
				for _, d := range f.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok || g.Tok != token.CONST {
						continue
					}
					for _, s := range g.Specs {
						vs := s.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								if v, ok := constValue(f, dir, vs.Values[i], consts); ok {
									consts[dir][n.Name] = v
								}
							}
						}
					}
				}
			}
		}
	}
	out := emitted{dims: map[string]map[string]bool{}, values: map[string]bool{}}
	for _, m := range consts {
		for _, v := range m {
			out.values[v] = true
		}
	}
	for _, dir := range emitterDirs {
		for _, f := range files[dir] {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || len(call.Args) != 3 {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "Count" && sel.Sel.Name != "Milliseconds") {
						return true
					}
					pos := fset.Position(call.Pos())
					for _, nc := range metricNames(t, pos, f, dir, fd, call.Args[0], files[dir], consts) {
						if out.dims[nc.name] == nil {
							out.dims[nc.name] = map[string]bool{}
						}
						for _, s := range dimSets(t, pos, f, dir, fd, call.Args[2], nc.args, consts) {
							out.dims[nc.name][s] = true
						}
					}
					return true
				})
			}
		}
	}
	return out
}

// constValue resolves e to a string constant: a literal, a constant of the
// package, or pkg.Name of another read package.
func constValue(f *ast.File, dir string, e ast.Expr, consts map[string]map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			v, err := strconv.Unquote(e.Value)
			return v, err == nil
		}
	case *ast.Ident:
		v, ok := consts[dir][e.Name]
		return v, ok
	case *ast.CallExpr: // a conversion: string(identity.KindEffect), Kind("x")
		if len(e.Args) == 1 {
			return constValue(f, dir, e.Args[0], consts)
		}
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		if !ok {
			return "", false
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == pkg.Name && strings.HasPrefix(p, modulePath) {
				v, ok := consts[strings.TrimPrefix(p, modulePath)][e.Sel.Name]
				return v, ok
			}
		}
	}
	return "", false
}

// nameCall is a metric name an emitting call writes and, when the call is
// in a helper that takes the name as a parameter, the helper caller's
// arguments by parameter name (resolved in the caller's file).
type nameCall struct {
	name string
	args map[string]string // parameter -> the caller's constant argument ("" included)
}

// metricNames resolves the metric name argument of an emitting call.
func metricNames(t *testing.T, pos token.Position, f *ast.File, dir string, fd *ast.FuncDecl, arg ast.Expr, pkg []*ast.File, consts map[string]map[string]string) []nameCall {
	t.Helper()
	if v, ok := constValue(f, dir, arg, consts); ok {
		return []nameCall{{name: v}}
	}
	id, ok := arg.(*ast.Ident)
	if !ok {
		t.Fatalf("%s: metric name %s: not a constant (teach readEmitted)", pos, exprString(arg))
	}
	// A parameter of a helper: the names its callers pass.
	var params []string
	for _, field := range fd.Type.Params.List {
		for _, n := range field.Names {
			params = append(params, n.Name)
		}
	}
	for idx, pname := range params {
		{
			if pname == id.Name {
				var out []nameCall
				for _, pf := range pkg {
					ast.Inspect(pf, func(n ast.Node) bool {
						c, ok := n.(*ast.CallExpr)
						if !ok || len(c.Args) <= idx {
							return true
						}
						var callee string
						switch fn := c.Fun.(type) {
						case *ast.SelectorExpr:
							callee = fn.Sel.Name
						case *ast.Ident:
							callee = fn.Name
						}
						if callee != fd.Name.Name {
							return true
						}
						v, ok := constValue(pf, dir, c.Args[idx], consts)
						if !ok {
							t.Fatalf("%s: %s(%s, …): not a constant metric name", fset(pf), callee, exprString(c.Args[idx]))
						}
						nc := nameCall{name: v, args: map[string]string{}}
						for i, a := range c.Args {
							if i < len(params) {
								if v, ok := constValue(pf, dir, a, consts); ok {
									nc.args[params[i]] = v
								}
							}
						}
						out = append(out, nc)
						return true
					})
				}
				if len(out) == 0 {
					t.Fatalf("%s: %s's metric name parameter %s: no caller", pos, fd.Name.Name, id.Name)
				}
				return out
			}
		}
	}
	// The key of a range over a map literal.
	var out []nameCall
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		r, ok := n.(*ast.RangeStmt)
		if !ok {
			return true
		}
		if k, ok := r.Key.(*ast.Ident); ok && k.Name == id.Name {
			if lit, ok := r.X.(*ast.CompositeLit); ok {
				for _, el := range lit.Elts {
					if v, ok := constValue(f, dir, el.(*ast.KeyValueExpr).Key, consts); ok {
						out = append(out, nameCall{name: v})
					}
				}
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatalf("%s: metric name %s: not resolved (teach readEmitted)", pos, id.Name)
	}
	return out
}

func fset(f *ast.File) string { return f.Name.Name }

// dimSets resolves the dimensions argument of an emitting call to the
// dimension name sets it may carry. A map literal assigned to the dims
// variable under `if p != ""`, p a parameter of a helper, is assigned only
// for the callers (args) that pass p something other than "" (and the
// variable stays nil for those that pass ""); a key set on it with
// dims[k] = … may or may not be there.
func dimSets(t *testing.T, pos token.Position, f *ast.File, dir string, fd *ast.FuncDecl, arg ast.Expr, args map[string]string, consts map[string]map[string]string) []string {
	t.Helper()
	keys := func(lit *ast.CompositeLit) []string {
		var ks []string
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				t.Fatalf("%s: dimensions literal without keys", pos)
			}
			k, ok := constValue(f, dir, kv.Key, consts)
			if !ok {
				t.Fatalf("%s: dimension name %s: not a constant", pos, exprString(kv.Key))
			}
			ks = append(ks, k)
		}
		return ks
	}
	switch a := arg.(type) {
	case *ast.Ident:
		if a.Name == "nil" {
			return []string{""}
		}
		var bases [][]string
		var optional []string
		declaredNil, skipped := false, false
		var stack []ast.Node
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			switch s := n.(type) {
			case *ast.ValueSpec: // var dims map[string]string
				for i, nm := range s.Names {
					if nm.Name == a.Name && i >= len(s.Values) {
						declaredNil = true
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range s.Lhs {
					switch l := lhs.(type) {
					case *ast.Ident:
						if l.Name == a.Name && i < len(s.Rhs) {
							lit, ok := s.Rhs[i].(*ast.CompositeLit)
							if !ok {
								t.Fatalf("%s: dimensions %s assigned from %s (teach readEmitted)", pos, a.Name, exprString(s.Rhs[i]))
							}
							if p := nonEmptyGuard(stack); p != "" && args != nil {
								if v, ok := args[p]; ok && v == "" {
									skipped = true // this caller passes "": not assigned
									continue
								}
							}
							bases = append(bases, keys(lit))
						}
					case *ast.IndexExpr:
						if x, ok := l.X.(*ast.Ident); ok && x.Name == a.Name {
							k, ok := constValue(f, dir, l.Index, consts)
							if !ok {
								t.Fatalf("%s: dimension name %s: not a constant", pos, exprString(l.Index))
							}
							optional = append(optional, k)
						}
					}
				}
			}
			return true
		})
		if declaredNil && (len(bases) == 0 || skipped || args == nil) {
			bases = append(bases, nil)
		}
		if len(bases) == 0 {
			t.Fatalf("%s: dimensions %s: no map literal found (teach readEmitted)", pos, a.Name)
		}
		var out []string
		for _, b := range bases {
			for mask := 0; mask < 1<<len(optional); mask++ {
				set := slices.Clone(b)
				for i, k := range optional {
					if mask&(1<<i) != 0 {
						set = append(set, k)
					}
				}
				out = append(out, dimKey(set))
			}
		}
		return out
	case *ast.CompositeLit:
		return []string{dimKey(keys(a))}
	}
	t.Fatalf("%s: dimensions %s (teach readEmitted)", pos, exprString(arg))
	return nil
}

// nonEmptyGuard returns p when the innermost if around the last node of
// stack is `if p != ""`, else "".
func nonEmptyGuard(stack []ast.Node) string {
	for i := len(stack) - 1; i >= 0; i-- {
		if is, ok := stack[i].(*ast.IfStmt); ok {
			if b, ok := is.Cond.(*ast.BinaryExpr); ok && b.Op == token.NEQ {
				if x, ok := b.X.(*ast.Ident); ok {
					if y, ok := b.Y.(*ast.BasicLit); ok && y.Value == `""` {
						return x.Name
					}
				}
			}
			return ""
		}
	}
	return ""
}

// dimKey is a dimension name set: sorted, deduplicated, comma-joined.
func dimKey(names []string) string {
	s := slices.Clone(names)
	sort.Strings(s)
	return strings.Join(slices.Compact(s), ",")
}

func exprString(e ast.Expr) string { return fmt.Sprintf("%T", e) }

// metricRef is one metric an alarm or the dashboard watches.
type metricRef struct {
	where, namespace, name string
	dims                   []dimRef
	search                 bool // a SEARCH expression: its schema is the dimension names
	sub                    bool // the namespace is in a !Sub: CloudFormation substitutes its ${X}
}

type dimRef struct {
	name  string
	value *yaml.Node // a template node (scalar or intrinsic); nil in a SEARCH schema
	text  string     // a dashboard value: literal, or "${X}" naming a resource or variable
}

// tmpl is template.yaml, parsed.
type tmpl struct {
	root       *yaml.Node
	resources  map[string]*yaml.Node
	types      map[string]string
	params     map[string]*yaml.Node
	conditions map[string]*yaml.Node
}

func get(n *yaml.Node, key string) *yaml.Node {
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
	}
	return nil
}

// fillTerm is a metric of an alarm's sum with its missing periods as 0.
var fillTerm = regexp.MustCompile(`^FILL\([a-z][A-Za-z0-9_]*, 0\)$`)

// sequence returns the items of a sequence node (nil for anything else).
func sequence(n *yaml.Node) []*yaml.Node {
	if n != nil && n.Kind == yaml.SequenceNode {
		return n.Content
	}
	return nil
}

func mapping(n *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = n.Content[i+1]
		}
	}
	return out
}

func parseTemplate(t *testing.T, b []byte) tmpl {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	tp := tmpl{root: root, resources: mapping(get(root, "Resources")), types: map[string]string{},
		params: mapping(get(root, "Parameters")), conditions: mapping(get(root, "Conditions"))}
	for id, r := range tp.resources {
		tp.types[id] = get(r, "Type").Value
	}
	return tp
}

// refs returns the logical ids and parameters n refers to (!Ref X,
// !GetAtt X.Attr, ${X} and ${X.Attr} in a !Sub), through !If branches.
func refs(n *yaml.Node) []string {
	var out []string
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		switch {
		case n.Kind == yaml.ScalarNode && n.Tag == "!Ref":
			out = append(out, n.Value)
		case n.Kind == yaml.ScalarNode && n.Tag == "!GetAtt":
			out = append(out, n.Value)
		case n.Kind == yaml.ScalarNode && n.Tag == "!Sub":
			for _, m := range subVarRe.FindAllStringSubmatch(n.Value, -1) {
				out = append(out, m[1])
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

var subVarRe = regexp.MustCompile(`\$\{([A-Za-z0-9:.]+)\}`)

// metricRefs returns every metric the template's alarms and its dashboard
// watch.
func (tp tmpl) metricRefs(t *testing.T) []metricRef {
	t.Helper()
	var out []metricRef
	fromStat := func(where string, m *yaml.Node) metricRef {
		ns := get(m, "Namespace")
		r := metricRef{where: where, namespace: ns.Value, name: get(m, "MetricName").Value, sub: ns.Tag == "!Sub"}
		if ds := get(m, "Dimensions"); ds != nil {
			for _, d := range ds.Content {
				r.dims = append(r.dims, dimRef{name: get(d, "Name").Value, value: get(d, "Value")})
			}
		}
		return r
	}
	for id, r := range tp.resources {
		p := get(r, "Properties")
		switch tp.types[id] {
		case "AWS::CloudWatch::Alarm":
			if get(p, "MetricName") != nil {
				out = append(out, fromStat(id, p))
			}
			if ms := get(p, "Metrics"); ms != nil {
				// A term an !If includes in some postures only: either branch.
				for _, item := range ms.Content {
					for _, q := range ifBranches(item) {
						if st := get(q, "MetricStat"); st != nil {
							out = append(out, fromStat(id+"/"+get(q, "Id").Value, get(st, "Metric")))
						}
					}
				}
			}
		case "AWS::CloudWatch::Dashboard":
			out = append(out, dashboardRefs(t, id, get(p, "DashboardBody"))...)
		}
	}
	return out
}

// ifBranches returns the values n may take: both branches of an !If
// (through nested ones), less AWS::NoValue; n itself otherwise.
func ifBranches(n *yaml.Node) []*yaml.Node {
	switch {
	case n == nil || (n.Tag == "!Ref" && n.Value == "AWS::NoValue"):
		return nil
	case n.Tag == "!If" && len(n.Content) == 3:
		return append(ifBranches(n.Content[1]), ifBranches(n.Content[2])...)
	}
	return []*yaml.Node{n}
}

// resolveIfs returns a copy of n with each !If replaced by the branch its
// condition takes under params (the parameters' defaults overridden), a
// sequence item or mapping key that resolves to AWS::NoValue dropped; nil
// when n itself resolves to AWS::NoValue.
func (tp tmpl) resolveIfs(t *testing.T, n *yaml.Node, params map[string]string) *yaml.Node {
	t.Helper()
	switch {
	case n == nil || (n.Tag == "!Ref" && n.Value == "AWS::NoValue"):
		return nil
	case n.Tag == "!If" && len(n.Content) == 3:
		if tp.evalCond(t, n.Content[0].Value, params) {
			return tp.resolveIfs(t, n.Content[1], params)
		}
		return tp.resolveIfs(t, n.Content[2], params)
	case len(n.Content) == 0:
		return n
	}
	c := *n
	c.Content = nil
	for _, x := range n.Content {
		r := tp.resolveIfs(t, x, params)
		if r == nil {
			if n.Kind == yaml.MappingNode {
				c.Content = c.Content[:len(c.Content)-1] // the key of a value of AWS::NoValue
			}
			continue
		}
		c.Content = append(c.Content, r)
	}
	return &c
}

// searchRe matches a SEARCH of one metric name; a schema's quoted
// namespace may hold a } (the template's ${AWS::StackName}).
var searchRe = regexp.MustCompile(`^SEARCH\('\{((?:[^}"]|"[^"]*")*)\} MetricName="([^"]+)"', '\w+', \d+\)$`)

// dashboardRefs reads the metrics of a DashboardBody (a !Sub of a JSON
// document, or [document, variables]).
func dashboardRefs(t *testing.T, id string, body *yaml.Node) []metricRef {
	t.Helper()
	src, sub := body, body.Tag == "!Sub"
	if body.Kind == yaml.SequenceNode {
		src = body.Content[0]
	}
	var doc struct {
		Widgets []struct {
			Properties struct {
				Title   string  `json:"title"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(src.Value), &doc); err != nil {
		t.Fatalf("%s: DashboardBody is not JSON: %v", id, err)
	}
	var out []metricRef
	for _, w := range doc.Widgets {
		for _, m := range w.Properties.Metrics {
			where := id + " " + strconv.Quote(w.Properties.Title)
			if len(m) > 0 {
				if obj, ok := m[0].(map[string]any); ok {
					expr, _ := obj["expression"].(string)
					sm := searchRe.FindStringSubmatch(expr)
					if sm == nil {
						t.Fatalf("%s: expression %q is not a SEARCH of one metric name", where, expr)
					}
					schema := strings.Split(sm[1], ",")
					// A namespace of other than letters and digits is
					// written in double quotes in a SEARCH schema.
					ns := schema[0]
					if uq, err := strconv.Unquote(ns); err == nil {
						ns = uq
					}
					r := metricRef{where: where, namespace: ns, name: sm[2], search: true, sub: sub}
					for _, d := range schema[1:] {
						r.dims = append(r.dims, dimRef{name: d})
					}
					out = append(out, r)
					continue
				}
			}
			var parts []string
			for _, x := range m {
				if s, ok := x.(string); ok {
					parts = append(parts, s)
				}
			}
			if len(parts) < 2 || len(parts)%2 != 0 {
				t.Fatalf("%s: metric %v: want [namespace, name, dimension, value, …, {options}]", where, m)
			}
			r := metricRef{where: where, namespace: parts[0], name: parts[1], sub: sub}
			for i := 2; i < len(parts); i += 2 {
				r.dims = append(r.dims, dimRef{name: parts[i], text: parts[i+1]})
			}
			out = append(out, r)
		}
	}
	return out
}

// stackNamespace is the namespace template.yaml gives every function in
// METRICS_NAMESPACE (a !Sub), and the one its alarms and dashboard read:
// the stack's own, so two stacks in one account and region neither page
// for nor subtract each other's series (RED_TEAM 253).
const stackNamespace = "idemkit/${AWS::StackName}"

// metricsNamespace is the namespace the functions' EMF lines are written
// under: stackNamespace, which template.yaml must give every function.
func metricsNamespace(t *testing.T, tp tmpl) string {
	t.Helper()
	for _, id := range tp.typesOf("AWS::Serverless::Function") {
		v := get(get(get(get(tp.resources[id], "Properties"), "Environment"), "Variables"), "METRICS_NAMESPACE")
		switch {
		case v == nil:
			t.Errorf("%s sets no METRICS_NAMESPACE: it writes under the default %q, which every stack in the account and region shares; want !Sub %q", id, settingDefault(t, "METRICS_NAMESPACE"), stackNamespace)
		case v.Tag != "!Sub" || v.Value != stackNamespace:
			t.Errorf("%s sets METRICS_NAMESPACE %s %q; want !Sub %q, the namespace the alarms and the dashboard read", id, v.Tag, v.Value, stackNamespace)
		}
	}
	return stackNamespace
}

// settingDefault is the default of the setting named name.
func settingDefault(t *testing.T, name string) string {
	t.Helper()
	for _, s := range settings.Settings {
		if s.Name == name {
			return s.Default
		}
	}
	t.Fatalf("no setting %s", name)
	return ""
}

// TestEachStackReadsOnlyItsOwnMetrics: CloudWatch metrics are per account
// and region, so two stacks there (staging beside production, or the new
// stack DEPLOYING.md deploys beside the old one) must not write one
// series. Every function (the authorizer included) is given the stack's
// own namespace, and every alarm (each term of the FILL(a, 0) - FILL(b, 0)
// alarms included) and every dashboard series reads that namespace or an
// AWS one of the stack's own resources; a program outside the stack keeps
// the default namespace idemkit. Before, every function wrote under
// idemkit and every alarm read it: one stack paged for the other's
// escaped effects, and its authorizer-errors alarm subtracted the other
// stack's refused keys (RED_TEAM 253).
func TestEachStackReadsOnlyItsOwnMetrics(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	if d := settingDefault(t, "METRICS_NAMESPACE"); d != "idemkit" {
		t.Errorf("METRICS_NAMESPACE defaults to %q; a program outside the stack writes under idemkit", d)
	}
	if n := len(tp.typesOf("AWS::Serverless::Function")); n < 5 {
		t.Fatalf("parsed %d functions", n)
	}
	ns := metricsNamespace(t, tp)
	own := 0
	for _, r := range tp.metricRefs(t) {
		switch {
		case strings.HasPrefix(r.namespace, "AWS/"):
		case r.namespace == ns && r.sub:
			own++
		default:
			t.Errorf("%s: %s %s: a namespace every stack in the account and region may write; want !Sub %q", r.where, r.namespace, r.name, ns)
		}
	}
	if own < 40 {
		t.Fatalf("only %d metrics of the stack's namespace watched: the alarms or the dashboard were not read", own)
	}
}

// checkMetricRefs returns what is wrong with the metrics the template's
// alarms and dashboard watch: an idemkit metric the code does not emit
// with exactly those dimension names (or a dimension value it never
// writes), or an AWS metric without the dimensions of the stack's own
// resources.
func checkMetricRefs(t *testing.T, tp tmpl, em emitted, ns string) []string {
	t.Helper()
	var problems []string
	bad := func(r metricRef, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s %s: ", r.where, r.namespace, r.name)+fmt.Sprintf(format, args...))
	}
	grants := tp.tableGrants()
	for _, r := range tp.metricRefs(t) {
		names := map[string]dimRef{}
		var dn []string
		for _, d := range r.dims {
			names[d.name] = d
			dn = append(dn, d.name)
		}
		// onlyDimension checks that dim is r's one dimension and that the
		// resources it names are of type typ (what says which), and
		// returns the ones that are.
		onlyDimension := func(r metricRef, dim, typ, what string) []string {
			d := names[dim]
			if len(r.dims) != 1 || d.name == "" {
				bad(r, "want the one dimension %s", dim)
				return nil
			}
			var ids []string
			for _, id := range tp.dimTargets(d) {
				if tp.types[id] != typ {
					bad(r, "%s refers to %s, not %s of the stack", dim, id, what)
				} else {
					ids = append(ids, id)
				}
			}
			return ids
		}
		switch r.namespace {
		case ns:
			sets, ok := em.dims[r.name]
			if !ok {
				bad(r, "no code emits this metric")
				continue
			}
			if !sets[dimKey(dn)] {
				bad(r, "dimensions [%s]; the code emits it with %v", dimKey(dn), keys(sets))
			}
			for _, d := range r.dims {
				v := d.text
				if d.value != nil {
					v = d.value.Value
					if d.value.Kind != yaml.ScalarNode || d.value.Tag != "!!str" {
						bad(r, "dimension %s: want a literal value", d.name)
						continue
					}
				}
				if !r.search && !em.values[v] {
					bad(r, "dimension %s=%q: no constant of the emitting code has this value", d.name, v)
				}
			}
		case "AWS/Lambda":
			for _, id := range onlyDimension(r, "FunctionName", "AWS::Serverless::Function", "a function") {
				if r.name == "IteratorAge" && !tp.hasStreamEvent(id) {
					bad(r, "%s reads no stream", id)
				}
			}
		case "AWS/DynamoDB":
			table := names["TableName"]
			want := []string{"TableName"}
			switch gsi, ok := names["GlobalSecondaryIndexName"]; {
			case r.name == "SystemErrors" || r.name == "SuccessfulRequestLatency":
				want = []string{"Operation", "TableName"}
			case r.name == "ReplicationLatency":
				want = []string{"ReceivingRegion", "TableName"}
			case ok && (r.name == "ReadThrottleEvents" || r.name == "WriteThrottleEvents"):
				// A throttle series of one of the table's indexes.
				want = []string{"GlobalSecondaryIndexName", "TableName"}
				for _, id := range tp.dimTargets(table) {
					if !tableHasIndex(tp.resources[id], gsi.value) {
						bad(r, "GlobalSecondaryIndexName: %s has no index %s", id, gsi.value.Value)
					}
				}
			}
			if dimKey(dn) != dimKey(want) {
				bad(r, "dimensions [%s], want [%s]", dimKey(dn), dimKey(want))
				continue
			}
			targets := tp.dimTargets(table)
			if len(targets) == 0 {
				bad(r, "TableName names no table of the stack")
			}
			for _, id := range targets {
				if !strings.HasPrefix(tp.types[id], "AWS::DynamoDB::") {
					bad(r, "TableName refers to %s, not a table of the stack", id)
				}
				if op, ok := names["Operation"]; ok {
					o := op.text
					if op.value != nil {
						o = op.value.Value
					}
					if !grants[id]["dynamodb:"+o] && !(strings.HasPrefix(o, "Transact") && grants[id]["dynamodb:PutItem"]) {
						bad(r, "Operation %s: no role may call it on %s", o, id)
					}
				}
			}
		case "AWS/SQS":
			onlyDimension(r, "QueueName", "AWS::SQS::Queue", "a queue")
		case "AWS/ApiGateway":
			// An HTTP API's per-API series: 4xx, 5xx, Count, Latency,
			// IntegrationLatency, DataProcessed under ApiId alone.
			if !slices.Contains([]string{"4xx", "5xx", "Count", "Latency", "IntegrationLatency", "DataProcessed"}, r.name) {
				bad(r, "an HTTP API publishes no metric %s", r.name)
			}
			onlyDimension(r, "ApiId", "AWS::Serverless::HttpApi", "an HTTP API")
		default:
			bad(r, "namespace %q is neither the functions' (%q) nor one of AWS/Lambda, AWS/DynamoDB, AWS/SQS, AWS/ApiGateway", r.namespace, ns)
		}
	}
	return problems
}

// tableHasIndex reports whether the table resource declares a global
// secondary index named by the scalar node name.
func tableHasIndex(table, name *yaml.Node) bool {
	if name == nil {
		return false
	}
	for _, gsi := range sequence(get(get(table, "Properties"), "GlobalSecondaryIndexes")) {
		if get(gsi, "IndexName").Value == name.Value {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, "["+k+"]")
	}
	sort.Strings(out)
	return out
}

// dimTargets returns the logical ids a dimension value names: a !Ref or
// !GetAtt of a resource, an Existing<Id> parameter standing for resource
// <Id> in a replica-region stack, or a dashboard's ${X} (a resource, a
// resource attribute, or a !Sub variable defined as such).
func (tp tmpl) dimTargets(d dimRef) []string {
	var names []string
	if d.value != nil {
		names = refs(d.value)
	} else if m := subVarRe.FindStringSubmatch(d.text); m != nil {
		names = []string{m[1]}
	}
	var out []string
	for _, n := range names {
		id, _, _ := strings.Cut(n, ".")
		if v := tp.dashboardVar(id); v != nil {
			for _, x := range refs(v) {
				x, _, _ = strings.Cut(x, ".")
				out = append(out, tp.resolveExisting(x))
			}
			continue
		}
		out = append(out, tp.resolveExisting(id))
	}
	return out
}

func (tp tmpl) resolveExisting(id string) string {
	if _, ok := tp.params[id]; ok && strings.HasPrefix(id, "Existing") {
		return strings.TrimPrefix(id, "Existing")
	}
	return id
}

// dashboardVar returns a !Sub variable of a dashboard body.
func (tp tmpl) dashboardVar(name string) *yaml.Node {
	for id, r := range tp.resources {
		if tp.types[id] != "AWS::CloudWatch::Dashboard" {
			continue
		}
		if b := get(get(r, "Properties"), "DashboardBody"); b.Kind == yaml.SequenceNode && len(b.Content) == 2 {
			if v := get(b.Content[1], name); v != nil {
				return v
			}
		}
	}
	return nil
}

func (tp tmpl) hasStreamEvent(fn string) bool {
	for _, ev := range mapping(get(get(tp.resources[fn], "Properties"), "Events")) {
		if get(ev, "Type").Value == "DynamoDB" {
			return true
		}
	}
	return false
}

// tableGrants returns, for each table's logical id, the actions some IAM
// statement of the template allows on it (or on its index or stream).
func (tp tmpl) tableGrants() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if act, res := get(n, "Action"), get(n, "Resource"); act != nil && res != nil {
			var actions []string
			if act.Kind == yaml.SequenceNode {
				for _, a := range act.Content {
					actions = append(actions, a.Value)
				}
			} else {
				actions = []string{act.Value}
			}
			for _, x := range refs(res) {
				id, _, _ := strings.Cut(x, ".")
				id = tp.resolveExisting(id)
				if out[id] == nil {
					out[id] = map[string]bool{}
				}
				for _, a := range actions {
					out[id][a] = true
				}
			}
			// !Sub "…:table/${ExistingX}…" names the table through its parameter.
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(tp.root)
	return out
}

// TestAlarmsWatchWhatTheCodeEmits: every metric an alarm or the dashboard
// of template.yaml watches in the functions' namespace is one the code
// emits, with exactly the dimension names it is emitted with and a
// dimension value the code writes; every AWS metric names the stack's own
// function, table (with an operation some role performs on it) or queue.
// The metric names and dimensions are read from the emitting code itself
// (readEmitted), so an alarm can never watch a metric nobody writes.
func TestAlarmsWatchWhatTheCodeEmits(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	em := readEmitted(t, ".")
	ns := metricsNamespace(t, tp)
	for _, p := range checkMetricRefs(t, tp, em, ns) {
		t.Error(p)
	}
	if n := len(tp.metricRefs(t)); n < 40 {
		t.Fatalf("only %d metrics watched: the template's alarms or dashboard were not read", n)
	}
}

// TestAlarmCheckCatchesAMetricNobodyWrites: the check above fails for a
// misspelt metric name, a dimension the code does not emit, a dimension
// value nobody writes, a function or table that is not the stack's, and an
// operation no role performs.
func TestAlarmCheckCatchesAMetricNobodyWrites(t *testing.T) {
	em := readEmitted(t, ".")
	for _, c := range []struct{ name, old, new, want string }{
		{"misspelt name", "MetricName: idemkit.audit.escaped_total", "MetricName: idemkit.audit.escaped", "no code emits"},
		{"extra dimension", "        - {Name: table, Value: effects}\n", "        - {Name: table, Value: effects}\n        - {Name: kind, Value: effect}\n", "dimensions [kind,table]"},
		{"unwritten value", "{Name: trigger, Value: stream}", "{Name: trigger, Value: streams}", `trigger="streams"`},
		{"dimension a helper adds for other callers", `["idemkit/${AWS::StackName}", "idemkit.idempotency.store_unavailable_total", {`, `["idemkit/${AWS::StackName}", "idemkit.idempotency.store_unavailable_total", "Outcome", "claimed", {`, "dimensions [Outcome]"},
		{"dashboard dimension", `"Outcome", "replay"`, `"outcome", "replay"`, "dimensions [outcome]"},
		{"dashboard search schema", `{\"idemkit/${AWS::StackName}\",kind,region,strategy}`, `{\"idemkit/${AWS::StackName}\",kind,strategy,tenant}`, "dimensions [kind,strategy,tenant]"},
		{"not a function", "Value: !Ref ExecutorFunction}", "Value: !Ref ExecutorRole}", "not a function"},
		{"not a table", "{Name: TableName, Value: !Ref RunsTable}", "{Name: TableName, Value: !Ref StreamFailureQueue}", "not a table"},
		// RunsTable: no role scans it (the sweeper scans the effects and
		// idempotency tables).
		{"operation no role performs", "{Name: TableName, Value: !Ref RunsTable}\n                - {Name: Operation, Value: GetItem}",
			"{Name: TableName, Value: !Ref RunsTable}\n                - {Name: Operation, Value: Scan}", "Operation Scan"},
		{"index the table lacks", "{Name: GlobalSecondaryIndexName, Value: byWake}", "{Name: GlobalSecondaryIndexName, Value: byRun}", "has no index byRun"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := string(idemkit.Template)
			if !strings.Contains(src, c.old) {
				t.Fatalf("template.yaml has no %q to break", c.old)
			}
			tp := parseTemplate(t, []byte(strings.Replace(src, c.old, c.new, 1)))
			problems := checkMetricRefs(t, tp, em, metricsNamespace(t, tp))
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Fatalf("broken template passed (want a problem containing %q); problems: %q", c.want, problems)
			}
		})
	}
}

// TestAlarmsCoverWhatBreaksThePromise: there is an alarm on an effect left
// escaped, on stale runs, on the executor's start lag, on the 503
// store_unavailable and lease-lost counters (names from the code), on the
// failure queue of every stream mapping, on the iterator age of every
// function that reads a stream, on the throttles and system errors of
// every table and of each of its global secondary indexes, and on the
// errors of every function. Each notifies the
// AlarmTopicArn topic when one is given and has no action otherwise, and
// its threshold is a template parameter with a default. The dashboard
// shows claims, replays, in-flight answers, mismatches, conflicts, fence
// rejections, store latency, escaped effects and executor lag.
func TestAlarmsCoverWhatBreaksThePromise(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	refsByAlarm := map[string][]metricRef{}
	var dashboard []metricRef
	for _, r := range tp.metricRefs(t) {
		id, _, _ := strings.Cut(r.where, "/")
		id, _, _ = strings.Cut(id, " ")
		if tp.types[id] == "AWS::CloudWatch::Dashboard" {
			dashboard = append(dashboard, r)
		} else {
			refsByAlarm[id] = append(refsByAlarm[id], r)
		}
	}
	alarmOn := func(ns, name string, target string) bool {
		for _, rs := range refsByAlarm {
			for _, r := range rs {
				if r.namespace != ns || r.name != name {
					continue
				}
				if target == "" {
					return true
				}
				for _, d := range r.dims {
					if slices.Contains(tp.dimTargets(d), target) {
						return true
					}
				}
			}
		}
		return false
	}
	alarmOnIndex := func(name, table, index string) bool {
		for _, rs := range refsByAlarm {
			for _, r := range rs {
				if r.namespace != "AWS/DynamoDB" || r.name != name {
					continue
				}
				var onTable, onIndex bool
				for _, d := range r.dims {
					switch d.name {
					case "TableName":
						onTable = slices.Contains(tp.dimTargets(d), table)
					case "GlobalSecondaryIndexName":
						onIndex = d.value != nil && d.value.Value == index
					}
				}
				if onTable && onIndex {
					return true
				}
			}
		}
		return false
	}
	ns := metricsNamespace(t, tp)
	// A store the code cannot use as configured (a table missing, or of
	// another shape: every request answered 500) and a pending record or
	// claimed effect deleted by TTL (its dedup gone while work may be in
	// flight) page too.
	for _, m := range []string{auditfn.MetricEscaped, execfn.MetricStaleRuns, execfn.MetricStartLag, execfn.MetricRetriedRuns, execfn.MetricGivenUpRuns, execfn.MetricResumePasses, sweepfn.MetricIncomplete, kit.MetricConfigurationWarnings,
		idem.MetricStoreUnavailable, idem.MetricLeaseLostWrites, idem.MetricStoreMisconfigured, ledger.MetricStoreMisconfigured, auditfn.MetricTTLPending,
		conflictaudit.MetricConflictsAll, auditfn.MetricRestoreFailures} {
		if !alarmOn(ns, m, "") {
			t.Errorf("no alarm on %s", m)
		}
	}
	// What callers see: the API's 5xx answers whatever their cause (an
	// error of the store no counter names, an IAM regression, the
	// authorizer), and the api function throttled by Lambda.
	if !alarmOn("AWS/ApiGateway", "5xx", "HttpApi") {
		t.Error("no 5xx alarm on HttpApi")
	}
	if !alarmOn("AWS/Lambda", "Throttles", "ApiFunction") {
		t.Error("no Throttles alarm on ApiFunction")
	}
	// Global tables: replication slower than the advertised bound
	// (ReplicationLagBoundMs) pages, in the home stack and in a replica's.
	for _, table := range []string{"IdempotencyTable", "EffectsTable"} {
		if !alarmOn("AWS/DynamoDB", "ReplicationLatency", table) {
			t.Errorf("no ReplicationLatency alarm on %s", table)
		}
	}
	for id, typ := range tp.types {
		switch {
		case typ == "AWS::Serverless::Function":
			if !alarmOn("AWS/Lambda", "Errors", id) {
				t.Errorf("no Errors alarm on %s", id)
			}
			if tp.hasStreamEvent(id) && !alarmOn("AWS/Lambda", "IteratorAge", id) {
				t.Errorf("no IteratorAge alarm on %s, which reads a stream", id)
			}
			for _, ev := range mapping(get(get(tp.resources[id], "Properties"), "Events")) {
				if dest := get(get(get(get(ev, "Properties"), "DestinationConfig"), "OnFailure"), "Destination"); dest != nil {
					for _, q := range refs(dest) {
						q, _, _ = strings.Cut(q, ".")
						if !alarmOn("AWS/SQS", "ApproximateNumberOfMessagesVisible", q) {
							t.Errorf("no alarm on the failure queue %s of %s", q, id)
						}
					}
				}
			}
		case strings.HasPrefix(typ, "AWS::DynamoDB::"):
			for _, m := range []string{"ReadThrottleEvents", "WriteThrottleEvents", "SystemErrors"} {
				if !alarmOn("AWS/DynamoDB", m, id) {
					t.Errorf("no %s alarm on %s", m, id)
				}
			}
			// A table's throttle events leave out its global secondary
			// indexes, whose series carry GlobalSecondaryIndexName: a
			// throttled index throttles the table's writes unseen.
			for _, gsi := range sequence(get(get(tp.resources[id], "Properties"), "GlobalSecondaryIndexes")) {
				index := get(gsi, "IndexName").Value
				for _, m := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
					if !alarmOnIndex(m, id, index) {
						t.Errorf("no %s alarm on %s's index %s", m, id, index)
					}
				}
			}
		}
	}
	for id, typ := range tp.types {
		if typ != "AWS::CloudWatch::Alarm" {
			continue
		}
		r := tp.resources[id]
		if cond := get(r, "Condition"); cond != nil {
			// An alarm on a conditional resource shares its condition, or
			// has one that requires it (!And [!Condition X, …]); an
			// alarm that names the table in a replica stack too
			// (!If [ReplicaStack, !Ref ExistingX, !Ref X]) needs neither.
			for _, mr := range refsByAlarm[id] {
				for _, d := range mr.dims {
					if d.value != nil && slices.ContainsFunc(refs(d.value), func(p string) bool { return strings.HasPrefix(p, "Existing") }) {
						continue
					}
					for _, x := range tp.dimTargets(d) {
						if c := get(tp.resources[x], "Condition"); c != nil && !tp.requires(cond.Value, c.Value) {
							t.Errorf("%s: Condition %s, but %s has %s", id, cond.Value, x, c.Value)
						}
					}
				}
			}
		}
		p := get(r, "Properties")
		for _, a := range []string{"AlarmActions", "OKActions"} {
			v := get(p, a)
			if v == nil || v.Tag != "!If" || v.Content[0].Value != "HasAlarmTopic" || len(refs(v.Content[1])) != 1 ||
				refs(v.Content[1])[0] != "AlarmTopicArn" || v.Content[2].Value != "AWS::NoValue" {
				t.Errorf("%s: %s, want !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]", id, a)
			}
		}
		// Throttle and system-error series exist only for the periods
		// with events: a sum of them is missing (and, missing data being
		// notBreaching, never alarms) unless each term is filled with 0 (a
		// sum, or a difference: the authorizer's errors less its refusals).
		// A scheduled function's not-invoked alarm fills the hours after
		// its first run in range only (notInvokedExpr).
		for _, item := range sequence(get(p, "Metrics")) {
			for _, m := range ifBranches(item) {
				for _, expr := range ifBranches(get(m, "Expression")) {
					if notInvokedExpr.MatchString(expr.Value) {
						continue
					}
					for _, term := range regexp.MustCompile(` [+-] `).Split(expr.Value, -1) {
						if !fillTerm.MatchString(term) {
							t.Errorf("%s: the term %q of %q is not FILL(id, 0)", id, term, expr.Value)
						}
					}
				}
			}
		}
		th := get(p, "Threshold")
		if th == nil || th.Tag != "!Ref" || get(tp.params[th.Value], "Default") == nil {
			t.Errorf("%s: Threshold is not a parameter with a default", id)
		}
	}
	if c := tp.conditions["HasAlarmTopic"]; c == nil || !strings.Contains(fmt.Sprint(refs(c)), "AlarmTopicArn") {
		t.Errorf("no HasAlarmTopic condition on AlarmTopicArn")
	}
	if d := get(tp.params["AlarmTopicArn"], "Default"); d == nil || d.Value != "" {
		t.Errorf("AlarmTopicArn must be optional (default empty)")
	}
	onDashboard := func(ns, name, dim, value string) bool {
		for _, r := range dashboard {
			if r.namespace == ns && r.name == name {
				if dim == "" {
					return true
				}
				for _, d := range r.dims {
					if d.name == dim && d.text == value {
						return true
					}
				}
			}
		}
		return false
	}
	for _, o := range []string{idem.OutcomeClaimed, idem.OutcomeReplay, idem.OutcomeInFlight, idem.OutcomeMismatch} {
		if !onDashboard(ns, idem.MetricClaimOutcomes, idem.DimOutcome, o) {
			t.Errorf("dashboard: no %s %s=%s", idem.MetricClaimOutcomes, idem.DimOutcome, o)
		}
	}
	for _, m := range []string{ledger.MetricStaleFence, auditfn.MetricEscaped, execfn.MetricStartLag, "openwop.idempotency.cross_region_conflicts_total"} {
		if !onDashboard(ns, m, "", "") {
			t.Errorf("dashboard: no %s", m)
		}
	}
	if !onDashboard("AWS/DynamoDB", "SuccessfulRequestLatency", "", "") {
		t.Errorf("dashboard: no store latency")
	}
	if n := len(tp.typesOf("AWS::CloudWatch::Dashboard")); n != 1 {
		t.Errorf("%d dashboards, want one", n)
	}
}

// TestDashboardShowsEverySeriesTheCodeEmits: every metric the code emits
// is on the dashboard, in every dimension set it is emitted with, the
// retention sweeper's included. A SEARCH finds only the series whose
// dimension names are exactly its schema's, so a metric written with and
// without "keying" needs a SEARCH for each, and a series with no dimension
// (idemkit.audit.cross_region_conflicts_total) needs a plain line.
func TestDashboardShowsEverySeriesTheCodeEmits(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	em := readEmitted(t, ".")
	ns := metricsNamespace(t, tp)
	shown := map[string]map[string]bool{}
	for _, r := range tp.metricRefs(t) {
		id, _, _ := strings.Cut(r.where, " ")
		if tp.types[id] != "AWS::CloudWatch::Dashboard" || r.namespace != ns {
			continue
		}
		var names []string
		for _, d := range r.dims {
			names = append(names, d.name)
		}
		if shown[r.name] == nil {
			shown[r.name] = map[string]bool{}
		}
		shown[r.name][dimKey(names)] = true
	}
	for _, m := range []string{sweepfn.MetricDeleted, sweepfn.MetricIncomplete, conflictaudit.MetricConflictsAll} {
		if em.dims[m] == nil {
			t.Errorf("readEmitted found no emitter of %s", m)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(em.dims)) {
		for _, set := range slices.Sorted(maps.Keys(em.dims[name])) {
			if !shown[name][set] {
				t.Errorf("dashboard: no series of %s with dimensions [%s] (the code emits it so)", name, set)
			}
		}
	}
}

// requires reports whether the template's condition cond holds only when
// want does: it is want, or an !And one of whose terms is !Condition want.
func (tp tmpl) requires(cond, want string) bool {
	if cond == want {
		return true
	}
	c := tp.conditions[cond]
	if c == nil || c.Tag != "!And" {
		return false
	}
	for _, term := range c.Content {
		if term.Tag == "!Condition" && term.Value == want {
			return true
		}
	}
	return false
}

func (tp tmpl) typesOf(typ string) []string {
	var out []string
	for id, x := range tp.types {
		if x == typ {
			out = append(out, id)
		}
	}
	return out
}

// TestEveryMetricEmitterIsRead: a package that declares a Metric…
// constant is one readEmitted reads (emitterDirs), so the alarm check sees
// every metric the code writes.
func TestEveryMetricEmitterIsRead(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == "testdata" || (strings.HasPrefix(n, ".") && path != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Metric") && !slices.Contains(emitterDirs, filepath.ToSlash(filepath.Dir(path))) {
						t.Errorf("%s declares %s but %s is not in emitterDirs (alarms_test.go)", path, n.Name, filepath.Dir(path))
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// calledTables returns the tables (logical ids) some role of a stack
// deployed with params grants a DynamoDB action on, item- or index-level
// (a stream's reads are not the table's calls): the tables whose
// throttles and system errors the stack's functions can cause.
func (tp tmpl) calledTables(t *testing.T, params map[string]string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, role := range tp.typesOf("AWS::IAM::Role") {
		r := tp.resources[role]
		if c := get(r, "Condition"); c != nil && !tp.evalCond(t, c.Value, params) {
			continue
		}
		for _, pol := range sequence(get(get(r, "Properties"), "Policies")) {
			for _, st := range sequence(get(get(pol, "PolicyDocument"), "Statement")) {
				if st.Tag == "!If" {
					if tp.evalCond(t, st.Content[0].Value, params) {
						st = st.Content[1]
					} else {
						st = st.Content[2]
					}
				}
				dynamo := false
				for _, a := range yamlScalarsOf(get(st, "Action")) {
					dynamo = dynamo || strings.HasPrefix(a.Value, "dynamodb:")
				}
				if !dynamo {
					continue
				}
				for _, rs := range yamlScalarsOf(get(st, "Resource")) {
					if strings.Contains(rs.Value, "/stream") {
						continue
					}
					for _, id := range refs(rs) {
						id, _, _ = strings.Cut(id, ".")
						if strings.HasPrefix(tp.types[id], "AWS::DynamoDB::") {
							out[id] = true
						}
					}
				}
			}
		}
	}
	return out
}

// yamlScalarsOf returns the scalar nodes under n, n included (none for nil).
func yamlScalarsOf(n *yaml.Node) []*yaml.Node {
	if n == nil {
		return nil
	}
	var out []*yaml.Node
	if n.Kind == yaml.ScalarNode {
		out = append(out, n)
	}
	for _, c := range n.Content {
		out = append(out, yamlScalarsOf(c)...)
	}
	return out
}

// TestEveryAlarmCanFireInItsStack (RED_TEAM 399): in each posture of a
// home stack, every alarm the stack deploys watches at least one series
// something in that stack can write: a table one of its roles calls (the
// fence table is called under fenced-effects only), or a metric the code
// writes in that posture (the conflict audit runs only across regions, a
// table without TTL has no TTL deletions, the write-backs and the chunks'
// replication are reconciled-records'). An alarm that cannot fire is paid
// for every month and pages for nothing.
func TestEveryAlarmCanFireInItsStack(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	refsByAlarm := map[string][]metricRef{}
	for _, r := range tp.metricRefs(t) {
		if id, _, _ := strings.Cut(r.where, "/"); tp.types[id] == "AWS::CloudWatch::Alarm" {
			refsByAlarm[id] = append(refsByAlarm[id], r)
		}
	}
	emittedIn := func(params map[string]string, name, dim string) bool { return tp.emittedIn(t, params, name, dim) }
	postures := []map[string]string{
		{},
		{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1"},
		{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1,eu-central-1", "EffectsConsistency": "STRONG"},
		{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1"},
		{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1,eu-central-1", "EffectsConsistency": "STRONG"},
		{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1", "IdempotencyPolicy": "commerce"},
	}
	for _, params := range postures {
		called := tp.calledTables(t, params)
		for _, must := range []string{"IdempotencyTable", "RunsTable", "EffectsTable", "ApiKeysTable"} {
			if !called[must] {
				t.Fatalf("%v: no role calls %s (parsed %v): the check proves nothing", params, must, called)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(refsByAlarm)) {
			if c := get(tp.resources[id], "Condition"); c != nil && !tp.evalCond(t, c.Value, params) {
				continue
			}
			var why []string
			canFire := false
			for _, r := range refsByAlarm[id] {
				fires, what := true, r.namespace+" "+r.name
				switch {
				case r.namespace == "AWS/DynamoDB":
					for _, d := range r.dims {
						if d.name != "TableName" {
							continue
						}
						for _, x := range refs(d.value) {
							if strings.HasPrefix(tp.types[x], "AWS::DynamoDB::") && !called[x] {
								fires, what = false, what+" of "+x+", which no role of the stack calls"
							}
						}
					}
				case r.sub:
					dim := ""
					for _, d := range r.dims {
						dim = d.value.Value
					}
					if !emittedIn(params, r.name, dim) {
						fires, what = false, what+" "+dim+", which the code does not write in this posture"
					}
				}
				canFire = canFire || fires
				why = append(why, what)
			}
			if !canFire {
				t.Errorf("%v: %s is deployed but cannot fire: %s", params, id, strings.Join(why, "; "))
			}
		}
	}
}

// emittedIn says, for a metric of the stack's namespace whose writer is
// switched by the posture, whether a stack deployed with params writes it
// with dimension value dim ("" for none).
func (tp tmpl) emittedIn(t *testing.T, params map[string]string, name, dim string) bool {
	t.Helper()
	cross := params["CrossRegion"]
	if cross == "" {
		cross = "single-region"
	}
	strong := params["EffectsConsistency"] == "STRONG"
	switch name {
	case conflictaudit.MetricConflictsAll, conflictaudit.MetricConflicts:
		return cross != "single-region"
	case auditfn.MetricRestoreFailures, auditfn.MetricRestored, kit.MetricChunksReplicating:
		return cross == "reconciled-records"
	case auditfn.MetricTTLPending:
		if dim == auditfn.TableIdempotency {
			return cross != "fenced-effects"
		}
		return !strong && cross != "fenced-effects" // no TTL on EffectsTable under either
	case sweepfn.MetricIncomplete, sweepfn.MetricDeleted:
		if dim == sweepfn.TableIdempotency {
			return tp.evalCond(t, "IdempotencySwept", params)
		}
		return tp.evalCond(t, "Swept", params)
	case execfn.MetricStartLag, execfn.MetricStaleRuns, execfn.MetricRetriedRuns, execfn.MetricGivenUpRuns, execfn.MetricCapsBreached:
		// A fenced-effects replica stack's api keeps its runs in the home
		// stack's RunsTable: its own stays empty, and its executor starts,
		// retries, ends and claims no run.
		return !tp.evalCond(t, "ReplicaFenced", params)
	}
	return true
}

// alarmPostures are the postures of a home stack the per-posture alarm
// checks deploy.
var alarmPostures = []map[string]string{
	{},
	{"EffectsConsistency": "STRONG"},
	{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1"},
	{"CrossRegion": "reconciled-records", "ReplicaRegions": "eu-west-1,eu-central-1", "EffectsConsistency": "STRONG"},
	{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1"},
	{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1,eu-central-1", "EffectsConsistency": "STRONG"},
	{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1", "IdempotencyPolicy": "commerce"},
	{"CrossRegion": "fenced-effects", "HomeRegion": "eu-west-1",
		"ExistingIdempotencyTable": "idem", "ExistingEffectsTable": "effects", "ExistingFenceTable": "fence", "ExistingRunsTable": "runs",
		"ExistingIdempotencyStreamLabel": "2026-01-01T00:00:00.000", "ExistingEffectsStreamLabel": "2026-01-01T00:00:00.000"},
}

// streamReadIn reports whether a metric (a node with Namespace, MetricName
// and Dimensions) that is a function's IteratorAge is written in a stack
// deployed with params: the executor's runs stream carries nothing in a
// fenced-effects replica stack, whose runs are kept in the home stack.
func (tp tmpl) streamReadIn(t *testing.T, params map[string]string, m *yaml.Node) bool {
	t.Helper()
	if ns := get(m, "Namespace"); ns == nil || ns.Value != "AWS/Lambda" || get(m, "MetricName").Value != "IteratorAge" {
		return true
	}
	for _, d := range sequence(get(m, "Dimensions")) {
		if slices.Contains(refs(get(d, "Value")), "ExecutorFunction") {
			return !tp.evalCond(t, "ReplicaFenced", params)
		}
	}
	return true
}

// TestAlarmsReadOnlyWhatThePostureWrites (RED_TEAM 422, 424): in each posture,
// every metric of the stack's namespace a deployed alarm reads is one the
// code writes in that posture (each such metric is billed, $0.10 a month,
// and a term nothing writes only costs), and each alarm's expression names
// exactly the metrics it reads there. Before, STACK-store-unavailable
// subtracted idemkit.idempotency.chunks_replicating_total, written under
// reconciled-records only, and STACK-ttl-expired-pending summed its
// effects term under EffectsConsistency STRONG, where the effects table
// has no TTL.
func TestAlarmsReadOnlyWhatThePostureWrites(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	ns := metricsNamespace(t, tp)
	idRe := regexp.MustCompile(`\b[a-z][A-Za-z0-9_]*\b`)
	for _, params := range alarmPostures {
		for _, id := range slices.Sorted(slices.Values(tp.typesOf("AWS::CloudWatch::Alarm"))) {
			r := tp.resources[id]
			if c := get(r, "Condition"); c != nil && !tp.evalCond(t, c.Value, params) {
				continue
			}
			p := tp.resolveIfs(t, get(r, "Properties"), params)
			read := map[string]bool{}
			var exprs []string
			for _, m := range sequence(get(p, "Metrics")) {
				if e := get(m, "Expression"); e != nil {
					if e.Kind != yaml.ScalarNode {
						t.Errorf("%v: %s: an expression that is no string", params, id)
						continue
					}
					exprs = append(exprs, e.Value)
					continue
				}
				mid := get(m, "Id").Value
				read[mid] = true
				st := get(get(m, "MetricStat"), "Metric")
				if !tp.streamReadIn(t, params, st) {
					t.Errorf("%v: %s reads the IteratorAge of a function whose stream nothing of this stack writes", params, id)
				}
				if ns := get(st, "Namespace"); ns.Tag != "!Sub" || ns.Value != stackNamespace {
					continue
				}
				dim := ""
				for _, d := range sequence(get(st, "Dimensions")) {
					dim = get(d, "Value").Value
				}
				if name := get(st, "MetricName").Value; !tp.emittedIn(t, params, name, dim) {
					t.Errorf("%v: %s reads %s %s %s (%s), which nothing writes in this posture: a metric paid for every month", params, id, ns, name, dim, mid)
				}
			}
			if get(p, "MetricName") != nil && !tp.streamReadIn(t, params, p) {
				t.Errorf("%v: %s reads the IteratorAge of a function whose stream nothing of this stack writes", params, id)
			}
			if ns, name := get(p, "Namespace"), get(p, "MetricName"); name != nil && ns.Tag == "!Sub" && ns.Value == stackNamespace {
				dim := ""
				for _, d := range sequence(get(p, "Dimensions")) {
					dim = get(d, "Value").Value
				}
				if !tp.emittedIn(t, params, name.Value, dim) {
					t.Errorf("%v: %s reads %s %s %s, which nothing writes in this posture: an alarm paid for every month that cannot fire", params, id, ns.Value, name.Value, dim)
				}
			}
			named := map[string]bool{}
			for _, e := range exprs {
				for _, x := range idRe.FindAllString(e, -1) {
					if !regexp.MustCompile(`^[A-Z_]+$`).MatchString(x) {
						named[x] = true
					}
				}
			}
			if len(exprs) > 0 && !maps.Equal(named, read) {
				t.Errorf("%v: %s: its expressions %q name %v, but it reads %v", params, id, exprs, slices.Sorted(maps.Keys(named)), slices.Sorted(maps.Keys(read)))
			}
		}
	}
}

// userDocs are the documents an operator reads for the metrics the stack
// writes: docs/ (less the red-team record and the measurement history),
// and the READMEs of the functions and of the two layers.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md", "functions/README.md", "idem/README.md", "ledger/README.md")
	out := map[string]string{}
	for _, f := range files {
		if b := filepath.Base(f); b == "RED_TEAM.md" || b == "performance-history.md" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

// TestEveryEmittedMetricIsDocumented (RED_TEAM 398): every metric the code
// writes (readEmitted) is named in a document an operator reads, and that
// document names each of its dimensions too (as `name`), so a series found
// in CloudWatch, on the dashboard or in an alarm can be looked up.
func TestEveryEmittedMetricIsDocumented(t *testing.T) {
	docs := userDocs(t)
	em := readEmitted(t, ".")
	if len(em.dims) < 20 {
		t.Fatalf("read %d emitted metrics: the check proves nothing", len(em.dims))
	}
	for _, name := range slices.Sorted(maps.Keys(em.dims)) {
		var dimNames []string
		for set := range em.dims[name] {
			for _, d := range strings.Split(set, ",") {
				if d != "" && !slices.Contains(dimNames, d) {
					dimNames = append(dimNames, d)
				}
			}
		}
		found := false
		for _, f := range slices.Sorted(maps.Keys(docs)) {
			doc := docs[f]
			if !strings.Contains(doc, name) {
				continue
			}
			ok := true
			for _, d := range dimNames {
				if !strings.Contains(doc, "`"+d+"`") {
					ok = false
				}
			}
			if ok {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s (dimensions %v): no user document names it with its dimensions (docs/, README.md, functions/README.md, idem/README.md, ledger/README.md)", name, dimNames)
		}
	}
}

// TestRunbookHasALinePerAlarm: docs/DEPLOYING.md's "what pages you, and
// what to do" has exactly one row per alarm of template.yaml, by its name,
// each alarm's description points there, and the escaped-effects row says
// how to settle one with `idemkit effects`.
func TestRunbookHasALinePerAlarm(t *testing.T) {
	doc := deployDoc(t)
	const head = "## The reference stack: what pages you, and what to do\n"
	i := strings.Index(doc, head)
	if i < 0 {
		t.Fatalf("docs/DEPLOYING.md has no section %q", strings.TrimSpace(head))
	}
	section := doc[i+len(head):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if m := regexp.MustCompile("^\\| `STACK-([a-z0-9-]+)` \\|").FindStringSubmatch(line); m != nil {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("two runbook rows for %s", m[1])
			}
			rows[m[1]] = line
		}
	}
	tp := parseTemplate(t, idemkit.Template)
	alarms := tp.typesOf("AWS::CloudWatch::Alarm")
	for _, id := range alarms {
		p := get(tp.resources[id], "Properties")
		name := get(p, "AlarmName")
		if name == nil || name.Tag != "!Sub" || !strings.HasPrefix(name.Value, "${AWS::StackName}-") {
			t.Errorf("%s: AlarmName is not !Sub \"${AWS::StackName}-…\"", id)
			continue
		}
		short := strings.TrimPrefix(name.Value, "${AWS::StackName}-")
		if rows[short] == "" {
			t.Errorf("%s (%s) has no runbook row in docs/DEPLOYING.md", id, short)
		}
		delete(rows, short)
		if d := get(p, "AlarmDescription"); d == nil || !strings.Contains(d.Value, "docs/DEPLOYING.md") {
			t.Errorf("%s: the description does not point to the runbook", id)
		}
	}
	for short := range rows {
		t.Errorf("runbook row STACK-%s names no alarm of template.yaml", short)
	}
	if !strings.Contains(section, "idemkit effects resolve EFFECT --as delivered") || !strings.Contains(section, "idemkit effects list --state escaped") {
		t.Error("the runbook does not say how to settle an escaped effect with idemkit effects")
	}
}

// TestAuthorizerAlarmIgnoresRefusedKeys: a Lambda authorizer refuses a key
// (401) by failing its invocation with "Unauthorized", which Lambda counts
// in the function's Errors. The authorizer-errors alarm must therefore not
// be the raw Errors of the authorizer, or any caller sending a few wrong
// keys pages the operator (and an outage hides among refusals): it watches
// Errors less the refusals the authorizer counts (authfn.MetricRefusals).
func TestAuthorizerAlarmIgnoresRefusedKeys(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	ns := metricsNamespace(t, tp)
	var found bool
	for _, id := range tp.typesOf("AWS::CloudWatch::Alarm") {
		p := get(tp.resources[id], "Properties")
		onErrors, errorsID := false, ""
		if get(p, "MetricName") != nil && get(p, "MetricName").Value == "Errors" && strings.Contains(fmt.Sprint(refs(get(p, "Dimensions"))), "AuthorizerFunction") {
			onErrors = true
		}
		ids := map[string]string{}
		var ret string
		for _, m := range sequence(get(p, "Metrics")) {
			if st := get(get(m, "MetricStat"), "Metric"); st != nil {
				ids[get(m, "Id").Value] = get(st, "Namespace").Value + " " + get(st, "MetricName").Value
				if get(st, "MetricName").Value == "Errors" && strings.Contains(fmt.Sprint(refs(get(st, "Dimensions"))), "AuthorizerFunction") {
					onErrors, errorsID = true, get(m, "Id").Value
				}
			}
			if e := get(m, "Expression"); e != nil && (get(m, "ReturnData") == nil || get(m, "ReturnData").Value != "false") {
				ret = e.Value
			}
		}
		if !onErrors {
			continue
		}
		found = true
		var refusalsID string
		for mid, m := range ids {
			if m == ns+" "+authfn.MetricRefusals {
				refusalsID = mid
			}
		}
		if errorsID == "" || refusalsID == "" || ret != fmt.Sprintf("FILL(%s, 0) - FILL(%s, 0)", errorsID, refusalsID) {
			t.Errorf("%s watches the authorizer's Errors, which count every refused key: want Errors less %s %s (FILL(errors, 0) - FILL(refusals, 0)), have %q", id, ns, authfn.MetricRefusals, ret)
		}
	}
	if !found {
		t.Error("no alarm on the authorizer's Errors")
	}
}

// TestStoreUnavailableAlarmLeavesOutChunksReplicating: under
// reconciled-records a replay that reads a record before its response's
// chunks replicated is answered 503 store_unavailable (RED_TEAM 212), which
// the Guard counts in idem.MetricStoreUnavailable; the kit counts it in
// kit.MetricChunksReplicating too, and the store-unavailable alarm fires on
// their difference, so a replica's normal replication lag never pages as a
// store outage. Before, the alarm read the 503s of both alike. In the
// other postures nothing writes the chunks' count, and the alarm reads the
// 503s alone (RED_TEAM 422: a term read is billed).
func TestStoreUnavailableAlarmLeavesOutChunksReplicating(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	a := tp.resources["StoreUnavailableAlarm"]
	if a == nil {
		t.Fatal("template.yaml has no StoreUnavailableAlarm")
	}
	for _, params := range alarmPostures {
		props := tp.resolveIfs(t, get(a, "Properties"), params)
		ids := map[string]string{} // metric id: metric name
		var expr []string
		for _, m := range sequence(get(props, "Metrics")) {
			id := get(m, "Id").Value
			if e := get(m, "Expression"); e != nil {
				expr = append(expr, e.Value)
				continue
			}
			ids[id] = get(get(get(m, "MetricStat"), "Metric"), "MetricName").Value
		}
		var unavailable, replicating string
		for id, name := range ids {
			switch name {
			case idem.MetricStoreUnavailable:
				unavailable = id
			case kit.MetricChunksReplicating:
				replicating = id
			}
		}
		want := fmt.Sprintf("FILL(%s, 0)", unavailable)
		if tp.emittedIn(t, params, kit.MetricChunksReplicating, "") {
			want = fmt.Sprintf("FILL(%s, 0) - FILL(%s, 0)", unavailable, replicating)
			if replicating == "" {
				want = "(no term of " + kit.MetricChunksReplicating + ")"
			}
		}
		if unavailable == "" || len(expr) != 1 || expr[0] != want {
			t.Errorf("%v: StoreUnavailableAlarm reads %v with %q; want %q", params, ids, expr, want)
		}
	}
}

// TestEventMetricAlarmsFireOnOnePeriod: the functions write their metrics
// only when something happens (a run starts, an attempt escapes, a write
// is refused), so a period without an event has no datapoint, which every
// alarm treats as not breaching. An alarm on one of them that needs more
// than one breaching period (DatapointsToAlarm, by default
// EvaluationPeriods) fires only while events come in every period: the
// executor-start-lag alarm, three 1-minute periods in a row, never fired
// on a stack starting fewer than one run a minute, however late each run
// started. Two AWS metrics are written the same way: Lambda's IteratorAge
// once per invocation of a function reading a stream, DynamoDB's
// ReplicationLatency only for writes replicated. The iterator-age alarms
// needed three 1-minute periods in a row, which a function whose every try
// runs over a minute (a record retried to its timeout) never gives, and the
// replication-lag alarms 3 of 5 minutes, which a stack writing fewer than
// three records in 5 minutes never gives (RED_TEAM 254).
func TestEventMetricAlarmsFireOnOnePeriod(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	ns := metricsNamespace(t, tp)
	checked := 0
	for _, id := range tp.typesOf("AWS::CloudWatch::Alarm") {
		p := get(tp.resources[id], "Properties")
		namespaces := []*yaml.Node{get(p, "Namespace")}
		for _, m := range sequence(get(p, "Metrics")) {
			namespaces = append(namespaces, get(get(get(m, "MetricStat"), "Metric"), "Namespace"))
		}
		// The AWS metrics written only when something happens.
		eventOnly := map[string]bool{"AWS/Lambda IteratorAge": true, "AWS/DynamoDB ReplicationLatency": true}
		if n := get(p, "Namespace"); n != nil && eventOnly[n.Value+" "+get(p, "MetricName").Value] {
			namespaces = append(namespaces, &yaml.Node{Value: ns})
		}
		if !slices.ContainsFunc(namespaces, func(n *yaml.Node) bool { return n != nil && n.Value == ns }) {
			continue
		}
		checked++
		if md := get(p, "TreatMissingData"); md == nil || md.Value != "notBreaching" {
			continue
		}
		need := get(p, "DatapointsToAlarm")
		if need == nil {
			need = get(p, "EvaluationPeriods")
		}
		if need == nil || need.Value != "1" {
			n := "unset"
			if need != nil {
				n = need.Value
			}
			t.Errorf("%s: a metric written only when an event happens, with missing data not breaching, "+
				"but %s breaching periods needed: it never fires while fewer events come than one a period", id, n)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d alarms on the functions' metrics found", checked)
	}
}

// TestScheduledFunctionErrorAlarmsCanFire: a function invoked only by its
// schedules fails at most as often as it is invoked: each schedule's
// invocations in the alarm's period, times the tries of each (its
// EventInvokeConfig's MaximumRetryAttempts, default 2, plus one). An
// errors alarm whose default threshold is more than that can never fire:
// the sweeper's (one run an hour, never retried) read the 5-minute
// FunctionErrorsThreshold, 5 by default, so a sweeper failing every hour
// (its configuration refused at start-up, a timeout) paged nobody.
func TestScheduledFunctionErrorAlarmsCanFire(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	rateRe := regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)
	unit := map[string]int{"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
	checked := 0
	for _, id := range tp.typesOf("AWS::CloudWatch::Alarm") {
		p := get(tp.resources[id], "Properties")
		if get(p, "Namespace") == nil || get(p, "Namespace").Value != "AWS/Lambda" || get(p, "MetricName").Value != "Errors" {
			continue
		}
		for _, d := range sequence(get(p, "Dimensions")) {
			for _, fn := range refs(get(d, "Value")) {
				props := get(tp.resources[fn], "Properties")
				period, err := strconv.Atoi(get(p, "Period").Value)
				if err != nil {
					t.Fatalf("%s: Period %v", id, err)
				}
				tries := 3
				if r := get(get(props, "EventInvokeConfig"), "MaximumRetryAttempts"); r != nil {
					n, err := strconv.Atoi(r.Value)
					if err != nil {
						t.Fatalf("%s: MaximumRetryAttempts %v", fn, err)
					}
					tries = n + 1
				}
				most, scheduled := 0, true
				for _, ev := range mapping(get(props, "Events")) {
					if get(ev, "Type").Value != "Schedule" {
						scheduled = false
						break
					}
					sched := get(get(ev, "Properties"), "Schedule").Value
					every := 0
					if m := rateRe.FindStringSubmatch(sched); m != nil {
						n, _ := strconv.Atoi(m[1])
						every = n * unit[m[2]]
					} else if hourlyCronRe.MatchString(sched) {
						every = 3600 // once an hour, on a fixed minute
					} else {
						t.Fatalf("%s: schedule %q is neither a rate nor an hourly cron", fn, sched)
					}
					most += (period + every - 1) / every * tries
				}
				if !scheduled {
					continue
				}
				checked++
				th := get(p, "Threshold")
				def, err := strconv.Atoi(get(tp.params[th.Value], "Default").Value)
				if err != nil {
					t.Fatalf("%s: threshold %s: %v", id, th.Value, err)
				}
				if def > most {
					t.Errorf("%s: %s fails at most %d times in %d s (its schedules, %d tries each), but the alarm needs %d (%s's default)",
						id, fn, most, period, tries, def, th.Value)
				}
				if mx := get(tp.params[th.Value], "MaxValue"); mx == nil || mx.Value != strconv.Itoa(most) {
					t.Errorf("%s: %s's MaxValue is not %d: a larger threshold could never fire", id, th.Value, most)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no errors alarm on a function invoked by schedules alone")
	}
}

// TestThresholdDescriptionsNameTheAlarmWindow: each alarm's threshold
// parameter says the window the alarm counts over (its period times its
// evaluation periods), as CONFIGURATION.md repeats it: "in 5 minutes" for
// one 5-minute period, "within 3 hours" for one of 3 hours, "3 minutes in
// a row" for three of a minute. A window changed without its description
// tells the operator a threshold the alarm does not apply.
func TestThresholdDescriptionsNameTheAlarmWindow(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	phrases := map[string]string{"300x1": "5 minute", "10800x1": "3 hours", "60x3": "3 minutes", "3600x3": "3 hours in a row", "300x3": "15 minutes"}
	checked := 0
	for _, id := range tp.typesOf("AWS::CloudWatch::Alarm") {
		p := get(tp.resources[id], "Properties")
		period := get(p, "Period")
		for _, m := range sequence(get(p, "Metrics")) {
			if ps := get(get(m, "MetricStat"), "Period"); ps != nil {
				period = ps
			}
		}
		if period == nil || get(p, "DatapointsToAlarm") != nil {
			continue
		}
		if n := get(p, "MetricName"); n != nil && n.Value == "ApproximateNumberOfMessagesVisible" {
			continue // a level, not a count: every period sees the messages that wait
		}
		want, ok := phrases[period.Value+"x"+get(p, "EvaluationPeriods").Value]
		if !ok {
			t.Errorf("%s: a window of %s s x %s periods, for which this test knows no wording", id, period.Value, get(p, "EvaluationPeriods").Value)
			continue
		}
		checked++
		th := get(p, "Threshold").Value
		d := strings.ReplaceAll(get(tp.params[th], "Description").Value, "-", " ")
		if !strings.Contains(d, want) {
			t.Errorf("%s: the alarm counts over %s s x %s, but %s's description does not say %q", id, period.Value, get(p, "EvaluationPeriods").Value, th, want)
		}
	}
	if checked < 30 {
		t.Fatalf("only %d alarms checked", checked)
	}
}

// TestOneStuckRecordReachesTheRestoreFailuresAlarms: the auditor counts a
// failed write-back (auditfn.MetricRestoreFailures) once per delivery of
// its stream record, and the stream delivers a record 1 + StreamMaxRetries
// times before it gives it up (the failure queue), so one record whose
// write-back keeps failing is counted at most StreamMaxRetries + 1 times.
// The restore-failures alarms exist to page while that record can still be
// written back (its conflict event is recorded only then): their default
// threshold must be reachable by one record at StreamMaxRetries' least
// value. Before, they read FunctionErrorsThreshold, 5 by default, which
// one record never reaches with StreamMaxRetries below 4: the first page
// came from the failure queue, after the record was given up
// (RED_TEAM 256).
func TestOneStuckRecordReachesTheRestoreFailuresAlarms(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	// StreamMaxRetries' least value: the least whole number its
	// AllowedPattern takes (a String parameter, RED_TEAM 401).
	retries := tp.params["StreamMaxRetries"]
	pat, err := regexp.Compile(`^(?:` + get(retries, "AllowedPattern").Value + `)$`)
	if err != nil {
		t.Fatalf("StreamMaxRetries: AllowedPattern: %v", err)
	}
	minRetries := -1
	for n := 0; n <= 100 && minRetries < 0; n++ {
		if pat.MatchString(strconv.Itoa(n)) {
			minRetries = n
		}
	}
	if minRetries < 0 {
		t.Fatal("StreamMaxRetries: its AllowedPattern takes no value 0..100")
	}
	checked := 0
	for _, id := range tp.typesOf("AWS::CloudWatch::Alarm") {
		p := get(tp.resources[id], "Properties")
		if n := get(p, "MetricName"); n == nil || n.Value != auditfn.MetricRestoreFailures {
			continue
		}
		checked++
		th := get(p, "Threshold")
		param := tp.params[th.Value]
		if th.Tag != "!Ref" || param == nil || get(param, "Default") == nil {
			t.Errorf("%s: threshold %s %q is not a parameter with a default", id, th.Tag, th.Value)
			continue
		}
		def, err := strconv.Atoi(get(param, "Default").Value)
		if err != nil {
			t.Fatalf("%s: Default: %v", th.Value, err)
		}
		if most := minRetries + 1; def > most {
			t.Errorf("%s: fires at %d failed write-backs in its period (%s's default), but one record is delivered, and fails, at most %d times with StreamMaxRetries %d: it pages only once the record is given up to the failure queue",
				id, def, th.Value, most, minRetries)
		}
		if d := get(param, "Description").Value; !strings.Contains(d, "StreamMaxRetries") {
			t.Errorf("%s: %s's description does not say one record fails at most StreamMaxRetries + 1 times", id, th.Value)
		}
	}
	if checked != 2 {
		t.Fatalf("found %d alarms on %s, want the Layer-1 and the effect restore-failures alarms", checked, auditfn.MetricRestoreFailures)
	}
}

// itemOperations are the DynamoDB data-plane actions whose calls a table's
// SystemErrors series counts per Operation.
var itemOperations = []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem", "TransactGetItems", "TransactWriteItems"}

// TestSystemErrorsAlarmsCountEveryCallGranted: a table's system-errors
// alarm sums SystemErrors per Operation, so an operation left out of the
// sum is a call whose HTTP 500s page nobody. Every item operation some role
// of the stack is granted on a table is a term of that table's alarm, the
// retention sweeper's Scan and DeleteItem included. Before, the effects
// table's alarm counted GetItem, PutItem and Query, and the idempotency
// table's had no Scan: under EffectsConsistency=STRONG or a fenced-effects
// home stack, DynamoDB failing the sweeper's calls paged nobody (RED_TEAM
// 319).
func TestSystemErrorsAlarmsCountEveryCallGranted(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	for _, p := range systemErrorsGaps(t, tp) {
		t.Error(p)
	}
}

// systemErrorsGaps returns each item operation granted on a table of tp
// that the table's SystemErrors alarm does not count.
func systemErrorsGaps(t *testing.T, tp tmpl) []string {
	t.Helper()
	counted := map[string]map[string]bool{} // table -> operations summed
	for _, r := range tp.metricRefs(t) {
		id, _, _ := strings.Cut(r.where, "/")
		if r.namespace != "AWS/DynamoDB" || r.name != "SystemErrors" || tp.types[id] != "AWS::CloudWatch::Alarm" {
			continue
		}
		var tables []string
		op := ""
		for _, d := range r.dims {
			switch d.name {
			case "TableName":
				tables = tp.dimTargets(d)
			case "Operation":
				op = d.value.Value
			}
		}
		for _, table := range tables {
			if counted[table] == nil {
				counted[table] = map[string]bool{}
			}
			counted[table][op] = true
		}
	}
	var gaps []string
	grants := tp.tableGrants()
	for _, table := range slices.Sorted(maps.Keys(grants)) {
		if !strings.HasPrefix(tp.types[table], "AWS::DynamoDB::") {
			continue
		}
		for _, op := range itemOperations {
			if grants[table]["dynamodb:"+op] && !counted[table][op] {
				gaps = append(gaps, fmt.Sprintf("%s: a role may call %s on it, but no system-errors alarm counts its SystemErrors (Operation %s)", table, op, op))
			}
		}
	}
	return gaps
}

// TestSystemErrorsGapCheckCatchesAnOperationLeftOut: the check above fails
// when one term of a table's system-errors sum is dropped.
func TestSystemErrorsGapCheckCatchesAnOperationLeftOut(t *testing.T) {
	const term = "                - {Name: TableName, Value: !Ref RunsTable}\n                - {Name: Operation, Value: Query}"
	src := string(idemkit.Template)
	if strings.Count(src, term) != 1 {
		t.Fatalf("template.yaml holds %d copies of the runs table's Query term", strings.Count(src, term))
	}
	mutated := strings.Replace(src, term, "                - {Name: TableName, Value: !Ref RunsTable}\n                - {Name: Operation, Value: GetItem}", 1)
	gaps := systemErrorsGaps(t, parseTemplate(t, []byte(mutated)))
	if !slices.ContainsFunc(gaps, func(g string) bool { return strings.HasPrefix(g, "RunsTable: a role may call Query") }) {
		t.Errorf("the runs table's Query left out of its alarm: gaps %q", gaps)
	}
}

// TestDashboardShowsEveryFunctionsErrors: the dashboard's errors widget has
// the Lambda Errors series of every function of the stack. Before, it had
// no sweeper: a sweeper failing every hour showed only as its runs stopped
// before the end (RED_TEAM 319).
func TestDashboardShowsEveryFunctionsErrors(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	shown := map[string]bool{}
	for _, r := range tp.metricRefs(t) {
		id, _, _ := strings.Cut(r.where, " ")
		if tp.types[id] != "AWS::CloudWatch::Dashboard" || r.namespace != "AWS/Lambda" || r.name != "Errors" {
			continue
		}
		for _, d := range r.dims {
			if d.name == "FunctionName" {
				for _, fn := range tp.dimTargets(d) {
					shown[fn] = true
				}
			}
		}
	}
	for _, fn := range slices.Sorted(slices.Values(tp.typesOf("AWS::Serverless::Function"))) {
		if !shown[fn] {
			t.Errorf("the dashboard shows no Errors of %s", fn)
		}
	}
}

// hourlyCronRe is a schedule that fires once an hour on a fixed minute,
// cron(M * * * ? *), as the sweeper's is (RED_TEAM 440).
var hourlyCronRe = regexp.MustCompile(`^cron\([0-9]{1,2} \* \* \* \? \*\)$`)
