package stream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrBadPattern matches the error ParseFilter returns for a pattern that
// is not a Lambda event filter pattern, or that uses a comparison Filter
// does not evaluate.
var ErrBadPattern = errors.New("stream: unsupported event filter pattern")

// Filter is the FilterCriteria of a Lambda event source mapping on a
// DynamoDB stream: a record is handed to the function when it matches at
// least one of the filter's patterns (Lambda ORs them), and is discarded
// otherwise. Match evaluates the patterns against the record as Lambda
// sees it: eventName, userIdentity, and the dynamodb member's Keys,
// NewImage and OldImage in DynamoDB JSON ({"S": "…"}, {"N": "12"}, …). So
// `idemkit dev` hands its stream pollers' handlers exactly the records the
// deployed mapping would invoke the function with.
//
// The comparisons evaluated are those of Lambda's filter rule syntax that
// a DynamoDB pattern can use on string, boolean and null leaves: equals (a
// string, number, boolean or null literal), exists (true and false),
// prefix, suffix, equals-ignore-case and anything-but (a literal or a list
// of them). A pattern using another (numeric ranges, $or, wildcard) is
// refused by ParseFilter (ErrBadPattern) rather than evaluated wrongly.
// The zero Filter has no pattern and matches every record, as a mapping
// without FilterCriteria hands over every record.
type Filter struct {
	patterns []map[string]any
}

// ParseFilter parses patterns, each the JSON text of one
// FilterCriteria.Filters[].Pattern.
func ParseFilter(patterns ...string) (Filter, error) {
	var f Filter
	for _, p := range patterns {
		var v any
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			return Filter{}, fmt.Errorf("%w: %q: %v", ErrBadPattern, p, err)
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			return Filter{}, fmt.Errorf("%w: %q is not a non-empty JSON object", ErrBadPattern, p)
		}
		if err := checkPattern(m, ""); err != nil {
			return Filter{}, fmt.Errorf("%w: %q: %v", ErrBadPattern, p, err)
		}
		f.patterns = append(f.patterns, m)
	}
	return f, nil
}

// Patterns is the number of patterns (0: every record matches).
func (f Filter) Patterns() int { return len(f.patterns) }

// Match reports whether Lambda would hand r to the function.
func (f Filter) Match(r StreamRecord) bool {
	if len(f.patterns) == 0 {
		return true
	}
	ev := r.lambdaEvent()
	for _, p := range f.patterns {
		if matchObject(p, ev, true) {
			return true
		}
	}
	return false
}

// checkPattern refuses what Match does not evaluate: every member is an
// object (a nested pattern) or an array of rules (a leaf).
func checkPattern(m map[string]any, at string) error {
	for k, v := range m {
		path := strings.TrimPrefix(at+"."+k, ".")
		if strings.HasPrefix(k, "$") {
			return fmt.Errorf("%s: %s is not evaluated", path, k)
		}
		switch v := v.(type) {
		case map[string]any:
			if len(v) == 0 {
				return fmt.Errorf("%s: an empty object", path)
			}
			if err := checkPattern(v, path); err != nil {
				return err
			}
		case []any:
			if len(v) == 0 {
				return fmt.Errorf("%s: an empty rule list", path)
			}
			for _, r := range v {
				if err := checkRule(r); err != nil {
					return fmt.Errorf("%s: %v", path, err)
				}
			}
		default:
			return fmt.Errorf("%s: a leaf must be an array of rules", path)
		}
	}
	return nil
}

func checkRule(r any) error {
	op, ok := r.(map[string]any)
	if !ok {
		return nil // a literal: string, number, boolean or null
	}
	if len(op) != 1 {
		return fmt.Errorf("a comparison names one operator, got %v", op)
	}
	for name, arg := range op {
		switch name {
		case "exists":
			if _, ok := arg.(bool); !ok {
				return errors.New("exists takes true or false")
			}
		case "prefix", "suffix", "equals-ignore-case":
			if _, ok := arg.(string); !ok {
				return fmt.Errorf("%s takes a string", name)
			}
		case "anything-but":
			vals, ok := arg.([]any)
			if !ok {
				vals = []any{arg}
			}
			for _, v := range vals {
				if !literal(v) {
					return errors.New("anything-but takes a literal or a list of literals")
				}
			}
		default:
			return fmt.Errorf("the comparison %q is not evaluated", name)
		}
	}
	return nil
}

func literal(v any) bool {
	switch v.(type) {
	case string, float64, bool, nil:
		return true
	}
	return false
}

// matchObject matches pattern p against v (present false: the field is
// absent from the event).
func matchObject(p map[string]any, v any, present bool) bool {
	obj, _ := v.(map[string]any)
	for k, sub := range p {
		fv, ok := obj[k]
		ok = ok && present
		switch sub := sub.(type) {
		case map[string]any:
			if !matchObject(sub, fv, ok) {
				return false
			}
		case []any:
			if !matchLeaf(sub, fv, ok) {
				return false
			}
		}
	}
	return true
}

// matchLeaf reports whether one of rules matches the event's value v (an
// array matches when one of its elements does).
func matchLeaf(rules []any, v any, present bool) bool {
	vals, isList := v.([]any)
	if !isList {
		vals = []any{v}
	}
	for _, r := range rules {
		op, isOp := r.(map[string]any)
		if !isOp {
			if present && anyValue(vals, func(x any) bool { return equal(r, x) }) {
				return true
			}
			continue
		}
		for name, arg := range op {
			switch name {
			case "exists":
				// Exists only holds for a leaf: an object is not one.
				_, isObj := v.(map[string]any)
				if arg.(bool) == (present && !isObj) {
					return true
				}
			case "prefix":
				if present && anyValue(vals, func(x any) bool { s, ok := x.(string); return ok && strings.HasPrefix(s, arg.(string)) }) {
					return true
				}
			case "suffix":
				if present && anyValue(vals, func(x any) bool { s, ok := x.(string); return ok && strings.HasSuffix(s, arg.(string)) }) {
					return true
				}
			case "equals-ignore-case":
				if present && anyValue(vals, func(x any) bool { s, ok := x.(string); return ok && strings.EqualFold(s, arg.(string)) }) {
					return true
				}
			case "anything-but":
				but, ok := arg.([]any)
				if !ok {
					but = []any{arg}
				}
				if present && anyValue(vals, func(x any) bool {
					if _, isObj := x.(map[string]any); isObj {
						return false
					}
					for _, b := range but {
						if equal(b, x) {
							return false
						}
					}
					return true
				}) {
					return true
				}
			}
		}
	}
	return false
}

func anyValue(vals []any, ok func(any) bool) bool {
	for _, v := range vals {
		if ok(v) {
			return true
		}
	}
	return false
}

// equal compares a pattern literal with an event value: strings, booleans
// and null exactly, numbers by value.
func equal(lit, v any) bool {
	switch l := lit.(type) {
	case float64:
		n, ok := v.(float64)
		return ok && n == l
	case nil:
		return v == nil
	default:
		return lit == v
	}
}

// lambdaEvent is r as the JSON a Lambda filter pattern is matched against
// (members decoded: strings, float64 numbers, bools, nil, []any and
// map[string]any).
func (r StreamRecord) lambdaEvent() map[string]any {
	ddb := map[string]any{}
	for name, img := range map[string]map[string]types.AttributeValue{"Keys": r.Keys, "NewImage": r.NewImage, "OldImage": r.OldImage} {
		if img != nil {
			ddb[name] = imageJSON(img)
		}
	}
	ev := map[string]any{"eventName": r.EventName, "eventSource": "aws:dynamodb", "dynamodb": ddb}
	if r.PrincipalID != "" || r.IdentityType != "" {
		ev["userIdentity"] = map[string]any{"principalId": r.PrincipalID, "type": r.IdentityType}
	}
	return ev
}

func imageJSON(img map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(img))
	for k, v := range img {
		out[k] = attrJSON(v)
	}
	return out
}

// attrJSON is one attribute value in DynamoDB JSON, as a stream record's
// image carries it in a Lambda event.
func attrJSON(av types.AttributeValue) map[string]any {
	strs := func(ss []string) []any {
		l := make([]any, len(ss))
		for i, s := range ss {
			l[i] = s
		}
		return l
	}
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": strs(v.Value)}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": strs(v.Value)}
	case *types.AttributeValueMemberBS:
		l := make([]string, len(v.Value))
		for i, b := range v.Value {
			l[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": strs(l)}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = attrJSON(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		return map[string]any{"M": imageJSON(v.Value)}
	}
	return map[string]any{}
}
