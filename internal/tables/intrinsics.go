package tables

import (
	"fmt"
	"iter"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// toValue converts a YAML node into plain Go values (map[string]any, []any,
// string, bool, float64 / int, nil). CloudFormation short-form intrinsics
// (!Ref, !If, !Sub, !GetAtt, ...) are tagged nodes; they are rewritten into
// their long form ({"Ref": x} or {"Fn::If": [...]}) so that one resolver
// handles both spellings. !GetAtt "A.B" becomes {"Fn::GetAtt": ["A","B"]}.
func toValue(n *yaml.Node) (any, error) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, nil
		}
		return toValue(n.Content[0])
	}
	if n.Kind == yaml.AliasNode {
		return toValue(n.Alias)
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			val, err := toValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k] = val
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := toValue(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		v = s
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			v = nil
		case "!!bool":
			b, err := strconv.ParseBool(n.Value)
			if err != nil {
				// YAML 1.1 spellings (yes/no/on/off) are left as strings.
				v = n.Value
			} else {
				v = b
			}
		default:
			// Numbers are kept as strings: CloudFormation treats them as
			// strings anyway, and the table properties we read are strings.
			v = n.Value
		}
	}
	if tag := n.Tag; strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		name := tag[1:]
		switch name {
		case "Ref", "Condition":
			return map[string]any{name: v}, nil
		case "GetAtt":
			if s, ok := v.(string); ok {
				parts := strings.SplitN(s, ".", 2)
				l := make([]any, len(parts))
				for i, p := range parts {
					l[i] = p
				}
				v = l
			}
			return map[string]any{"Fn::GetAtt": v}, nil
		default:
			return map[string]any{"Fn::" + name: v}, nil
		}
	}
	return v, nil
}

// noValue is the result of resolving AWS::NoValue: the enclosing property is
// removed.
type noValue struct{}

// unresolved is returned for an intrinsic that cannot be evaluated locally
// (Fn::GetAtt, Fn::ImportValue, a Ref to a resource, ...). It is an error
// only if a property the local tooling needs depends on it.
type unresolved struct{ expr string }

func (u unresolved) Error() string { return "cannot resolve " + u.expr + " for local table creation" }

// resolver evaluates the intrinsics that can appear in table properties,
// using parameter defaults and fixed pseudo parameters.
type resolver struct {
	params     map[string]any // parameter name -> default value (string or []any)
	conditions map[string]any // condition name -> expression
	pseudo     map[string]string
	evaluating map[string]bool
}

func newResolver(root map[string]any, region string) *resolver {
	r := &resolver{
		params:     map[string]any{},
		conditions: map[string]any{},
		pseudo: map[string]string{
			"AWS::Region":           region,
			"AWS::AccountId":        "123456789012",
			"AWS::StackName":        "idemkit",
			"AWS::StackId":          "arn:aws:cloudformation:" + region + ":123456789012:stack/idemkit/local",
			"AWS::Partition":        "aws",
			"AWS::URLSuffix":        "amazonaws.com",
			"AWS::NoValue":          "",
			"AWS::NotificationARNs": "",
		},
		evaluating: map[string]bool{},
	}
	if ps, ok := root["Parameters"].(map[string]any); ok {
		for name, p := range ps {
			pm, _ := p.(map[string]any)
			if d, ok := pm["Default"]; ok {
				if t, _ := pm["Type"].(string); strings.HasPrefix(t, "List<") || t == "CommaDelimitedList" {
					if s, ok := d.(string); ok {
						var l []any
						for _, e := range strings.Split(s, ",") {
							l = append(l, strings.TrimSpace(e))
						}
						d = l
					}
				}
				r.params[name] = d
			}
		}
	}
	if cs, ok := root["Conditions"].(map[string]any); ok {
		r.conditions = cs
	}
	return r
}

// setParameters gives the template's parameters the values of params in
// place of their defaults (a list-typed one split at its commas, as its
// default is), each checked against the parameter's constraints as
// CloudFormation checks them at deploy time (checkParameter).
func (r *resolver) setParameters(root map[string]any, params map[string]string) error {
	ps, _ := root["Parameters"].(map[string]any)
	names := slices.Sorted(maps.Keys(params))
	for _, name := range names {
		v := params[name]
		p, ok := ps[name]
		if !ok {
			return &ParameterError{Name: name, Value: v, Reason: "the template has no parameter " + name}
		}
		pm, _ := p.(map[string]any)
		if reason := checkParameter(pm, v); reason != "" {
			return &ParameterError{Name: name, Value: v, Reason: reason}
		}
		if t, _ := pm["Type"].(string); strings.HasPrefix(t, "List<") || t == "CommaDelimitedList" {
			var l []any
			for _, e := range strings.Split(v, ",") {
				l = append(l, strings.TrimSpace(e))
			}
			r.params[name] = l
			continue
		}
		r.params[name] = v
	}
	return nil
}

// cfnNumber is a value CloudFormation takes for a Number parameter: an
// integer or a decimal, with an optional exponent.
var cfnNumber = regexp.MustCompile(`^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$`)

// checkParameter says why CloudFormation would refuse v for the parameter
// declared as pm, "" when it would take it: AllowedValues (v one of them),
// AllowedPattern (matching v as a whole), MinLength and MaxLength (a
// String's characters), and for a Number being a number within MinValue
// and MaxValue. A list-typed parameter (CommaDelimitedList, List<Number>,
// List<...>) has each of its comma-separated elements checked against
// AllowedValues (and a CommaDelimitedList against AllowedPattern), a
// List<Number>'s each being a number. A pattern that Go's regexp cannot
// read is not checked.
func checkParameter(pm map[string]any, v string) string {
	typ, _ := pm["Type"].(string)
	elems := []string{v}
	if strings.HasPrefix(typ, "List<") || typ == "CommaDelimitedList" {
		elems = strings.Split(v, ",")
		for i := range elems {
			elems[i] = strings.TrimSpace(elems[i])
		}
	}
	if allowed, ok := pm["AllowedValues"].([]any); ok {
		want := make([]string, len(allowed))
		for i, a := range allowed {
			want[i] = fmt.Sprint(a)
		}
		for _, e := range elems {
			if !slices.Contains(want, e) {
				return "want one of " + strings.Join(want, ", ")
			}
		}
	}
	if p, ok := pm["AllowedPattern"].(string); ok && (typ == "String" || typ == "CommaDelimitedList") {
		if re, err := regexp.Compile(`^(?:` + p + `)$`); err == nil {
			for _, e := range elems {
				if !re.MatchString(e) {
					reason := "want a value matching " + p
					if d, ok := pm["ConstraintDescription"].(string); ok && strings.TrimSpace(d) != "" {
						reason += " (" + strings.TrimSpace(d) + ")"
					}
					return reason
				}
			}
		}
	}
	if typ == "String" {
		n := utf8.RuneCountInString(v)
		if m, ok := bound(pm["MinLength"]); ok && float64(n) < m {
			return fmt.Sprintf("want at least %v characters", pm["MinLength"])
		}
		if m, ok := bound(pm["MaxLength"]); ok && float64(n) > m {
			return fmt.Sprintf("want at most %v characters", pm["MaxLength"])
		}
	}
	if typ == "List<Number>" {
		for _, e := range elems {
			if !cfnNumber.MatchString(e) {
				return "want numbers, comma-separated"
			}
		}
	}
	if typ == "Number" {
		lo, hasLo := bound(pm["MinValue"])
		hi, hasHi := bound(pm["MaxValue"])
		want := "want a number"
		switch {
		case hasLo && hasHi:
			want = fmt.Sprintf("want a number from %v to %v", pm["MinValue"], pm["MaxValue"])
		case hasLo:
			want = fmt.Sprintf("want a number of at least %v", pm["MinValue"])
		case hasHi:
			want = fmt.Sprintf("want a number of at most %v", pm["MaxValue"])
		}
		f, err := strconv.ParseFloat(v, 64)
		if !cfnNumber.MatchString(v) || err != nil || hasLo && f < lo || hasHi && f > hi {
			return want
		}
	}
	return ""
}

// bound reads a constraint's number (MinValue, MaxLength, ...) as the
// template gives it, a YAML number or a string.
func bound(v any) (float64, bool) {
	if v == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(fmt.Sprint(v)), 64)
	return f, err == nil
}

// resolve returns v with every intrinsic evaluated. Keys whose value resolves
// to AWS::NoValue are dropped. Intrinsics that cannot be evaluated locally
// yield an unresolved error.
func (r *resolver) resolve(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return r.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		if err := resolveKept(r, maps.All(x), func(k string, rv any) { out[k] = rv }); err != nil {
			return nil, err
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(x))
		if err := resolveKept(r, slices.All(x), func(_ int, rv any) { out = append(out, rv) }); err != nil {
			return nil, err
		}
		return out, nil
	default:
		return v, nil
	}
}

func (r *resolver) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		if name == "AWS::NoValue" {
			return noValue{}, nil
		}
		if v, ok := r.pseudo[name]; ok {
			return v, nil
		}
		if v, ok := r.params[name]; ok {
			return v, nil
		}
		return nil, unresolved{"!Ref " + name}
	case "Fn::If":
		l, ok := arg.([]any)
		if !ok || len(l) != 3 {
			return nil, fmt.Errorf("tables: malformed Fn::If %v", arg)
		}
		name, _ := l[0].(string)
		ok, err := r.Condition(name)
		if err != nil {
			return nil, err
		}
		if ok {
			return r.resolve(l[1])
		}
		return r.resolve(l[2])
	case "Fn::Sub":
		var tmpl string
		vars := map[string]any{}
		switch a := arg.(type) {
		case string:
			tmpl = a
		case []any:
			if len(a) != 2 {
				return nil, fmt.Errorf("tables: malformed Fn::Sub %v", arg)
			}
			tmpl, _ = a[0].(string)
			if m, ok := a[1].(map[string]any); ok {
				vars = m
			}
		}
		return r.sub(tmpl, vars)
	case "Fn::Join":
		l, ok := arg.([]any)
		if !ok || len(l) != 2 {
			return nil, fmt.Errorf("tables: malformed Fn::Join %v", arg)
		}
		sep, _ := l[0].(string)
		items, err := r.resolve(l[1])
		if err != nil {
			return nil, err
		}
		il, _ := items.([]any)
		parts := make([]string, len(il))
		for i, e := range il {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, sep), nil
	case "Fn::Select":
		iv, lv, err := r.resolvePair(fn, arg)
		if err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(fmt.Sprint(iv))
		if err != nil {
			return nil, fmt.Errorf("tables: Fn::Select index %v", iv)
		}
		ll, _ := lv.([]any)
		if i < 0 || i >= len(ll) {
			return nil, fmt.Errorf("tables: Fn::Select index %d out of range", i)
		}
		return ll[i], nil
	case "Fn::Split":
		// [delimiter, source]: the source's parts between each occurrence
		// of the delimiter, as CloudFormation splits it (empty parts kept:
		// "a," is ["a", ""]).
		dv, sv, err := r.resolvePair(fn, arg)
		if err != nil {
			return nil, err
		}
		delim, ok1 := dv.(string)
		src, ok2 := sv.(string)
		if !ok1 || !ok2 || delim == "" {
			return nil, fmt.Errorf("tables: malformed Fn::Split %v", arg)
		}
		parts := strings.Split(src, delim)
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	case "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or", "Condition":
		b, err := r.condExpr(map[string]any{fn: arg})
		return b, err
	default:
		return nil, unresolved{fn}
	}
}

// inRegion returns a copy of r whose AWS::Region is region.
func (r *resolver) inRegion(region string) *resolver {
	c := *r
	c.pseudo = maps.Clone(r.pseudo)
	c.pseudo["AWS::Region"] = region
	c.evaluating = map[string]bool{}
	return &c
}

func (r *resolver) sub(tmpl string, vars map[string]any) (any, error) {
	var b strings.Builder
	for {
		i := strings.Index(tmpl, "${")
		if i < 0 {
			b.WriteString(tmpl)
			return b.String(), nil
		}
		b.WriteString(tmpl[:i])
		rest := tmpl[i+2:]
		if strings.HasPrefix(rest, "!") { // ${!Literal}
			j := strings.Index(rest, "}")
			if j < 0 {
				return nil, fmt.Errorf("tables: unterminated ${ in Fn::Sub")
			}
			b.WriteString("${" + rest[1:j] + "}")
			tmpl = rest[j+1:]
			continue
		}
		j := strings.Index(rest, "}")
		if j < 0 {
			return nil, fmt.Errorf("tables: unterminated ${ in Fn::Sub")
		}
		name := rest[:j]
		var val any
		if v, ok := vars[name]; ok {
			rv, err := r.resolve(v)
			if err != nil {
				return nil, err
			}
			val = rv
		} else {
			rv, err := r.intrinsic("Ref", name)
			if err != nil {
				return nil, err
			}
			val = rv
		}
		b.WriteString(fmt.Sprint(val))
		tmpl = rest[j+1:]
	}
}

// Condition evaluates a named template condition with parameter defaults.
func (r *resolver) Condition(name string) (bool, error) {
	expr, ok := r.conditions[name]
	if !ok {
		return false, fmt.Errorf("tables: unknown condition %q", name)
	}
	if r.evaluating[name] {
		return false, fmt.Errorf("tables: condition %q refers to itself", name)
	}
	r.evaluating[name] = true
	defer delete(r.evaluating, name)
	return r.condExpr(expr)
}

func (r *resolver) condExpr(expr any) (bool, error) {
	m, ok := expr.(map[string]any)
	if !ok || len(m) != 1 {
		if b, ok := expr.(bool); ok {
			return b, nil
		}
		return false, fmt.Errorf("tables: malformed condition %v", expr)
	}
	for fn, arg := range m {
		switch fn {
		case "Condition":
			name, _ := arg.(string)
			return r.Condition(name)
		case "Fn::Equals":
			a, b, err := r.resolvePair(fn, arg)
			if err != nil {
				return false, err
			}
			return fmt.Sprint(a) == fmt.Sprint(b), nil
		case "Fn::Not":
			l, ok := arg.([]any)
			if !ok || len(l) != 1 {
				return false, fmt.Errorf("tables: malformed Fn::Not %v", arg)
			}
			b, err := r.condExpr(l[0])
			return !b, err
		case "Fn::And", "Fn::Or":
			l, ok := arg.([]any)
			if !ok {
				return false, fmt.Errorf("tables: malformed %s %v", fn, arg)
			}
			and := fn == "Fn::And"
			for _, e := range l {
				b, err := r.condExpr(e)
				if err != nil {
					return false, err
				}
				if and && !b {
					return false, nil
				}
				if !and && b {
					return true, nil
				}
			}
			return and, nil
		default:
			return false, fmt.Errorf("tables: %s is not a condition function", fn)
		}
	}
	return false, nil
}

// resolvePair resolves the two arguments of the intrinsic fn (Fn::Select,
// Fn::Equals); arg not being a list of two is malformed.
func (r *resolver) resolvePair(fn string, arg any) (a, b any, err error) {
	l, ok := arg.([]any)
	if !ok || len(l) != 2 {
		return nil, nil, fmt.Errorf("tables: malformed %s %v", fn, arg)
	}
	if a, err = r.resolve(l[0]); err != nil {
		return nil, nil, err
	}
	if b, err = r.resolve(l[1]); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// resolveKept resolves each value of seq in turn, handing the resolved
// value to put unless it is AWS::NoValue (which drops it).
func resolveKept[K any](r *resolver, seq iter.Seq2[K, any], put func(K, any)) error {
	for k, e := range seq {
		rv, err := r.resolve(e)
		if err != nil {
			return err
		}
		if _, drop := rv.(noValue); !drop {
			put(k, rv)
		}
	}
	return nil
}
