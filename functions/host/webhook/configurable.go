package webhook

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/idemkit/idemkit/internal/apierr"
)

// RunOptions.configurable is checked at create by the rules of the OpenWOP
// v2 configurable.schema.json (with budget-policy.schema.json for its
// budget section): a closed object, nested in closed sections, versioned
// (version REQUIRED, 1). The rules are written out here (the schema files
// are reference data, not shipped with the host); the tests hold them to
// the real schemas.

// kind is what a configurable key holds.
type kind int

const (
	kindObject     kind = iota // a closed object: only the keys in props
	kindInteger                // an integer (a number with no fraction) within min..max
	kindNumber                 // a number within min..max
	kindString                 // a string, one of enum when enum is set
	kindStringMap              // an object whose values are strings
	kindOpenObject             // any object
	kindStringSet              // an array of distinct strings
	kindVersion                // the number 1
	kindExtensions             // an object of <org>: {…}, org in the registered-org grammar
)

// rule is the schema of one configurable key.
type rule struct {
	kind     kind
	min, max *big.Rat
	enum     []string
	props    map[string]rule
}

func rat(s string) *big.Rat { r, _ := new(big.Rat).SetString(s); return r }

func integer(min string) rule { return rule{kind: kindInteger, min: rat(min)} }

func number(min, max string) rule {
	r := rule{kind: kindNumber, min: rat(min)}
	if max != "" {
		r.max = rat(max)
	}
	return r
}

// orgKey is the grammar of an extensions key (a registered org).
var orgKey = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// configurableRule is configurable.schema.json.
var configurableRule = rule{kind: kindObject, props: map[string]rule{
	"version": {kind: kindVersion},
	"run": {kind: kindObject, props: map[string]rule{
		"recursionLimit":      integer("1"),
		"runTimeoutMs":        integer("1"),
		"maxLoopIterations":   integer("1"),
		"escalationThreshold": number("0", "1"),
	}},
	"ai": {kind: kindObject, props: map[string]rule{
		"provider":           {kind: kindString},
		"model":              {kind: kindString},
		"temperature":        number("0", "2"),
		"maxTokens":          integer("1"),
		"credentialRef":      {kind: kindString},
		"promptOverrides":    {kind: kindStringMap},
		"mockProvider":       {kind: kindOpenObject},
		"reasoningVerbosity": {kind: kindString, enum: []string{"none", "summary", "full"}},
		"maxRefusals":        integer("0"),
	}},
	"distillation": {kind: kindObject, props: map[string]rule{
		"tokenBudget": integer("1"),
	}},
	// budget-policy.schema.json.
	"budget": {kind: kindObject, props: map[string]rule{
		"maxTokens":        integer("1"),
		"maxCostUsd":       number("0", ""),
		"maxToolCalls":     integer("1"),
		"maxRetries":       integer("0"),
		"modelAllow":       {kind: kindStringSet},
		"modelDeny":        {kind: kindStringSet},
		"thresholdPercent": number("0", "100"),
		"onExhaustion":     {kind: kindString, enum: []string{"fail", "interrupt"}},
	}},
	"extensions": {kind: kindExtensions},
}}

// jsonType is the JSON type a value starts with: object, array, string,
// boolean, null or number.
func jsonType(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// check validates v against r; the error names the key at path.
func (r rule) check(path string, v json.RawMessage) *apierr.Error {
	bad := func(what string) *apierr.Error {
		return validation(path, fmt.Sprintf("%s must be %s", path, what))
	}
	switch r.kind {
	case kindObject:
		var obj map[string]json.RawMessage
		if jsonType(v) != "object" || json.Unmarshal(v, &obj) != nil {
			return bad("an object")
		}
		keys := slices.Sorted(maps.Keys(obj))
		for _, k := range keys {
			if _, ok := r.props[k]; !ok {
				return validation(path+"."+k, fmt.Sprintf("unknown key %q in %s: it is closed (%s)", k, path, strings.Join(slices.Sorted(maps.Keys(r.props)), ", ")))
			}
		}
		if _, ok := r.props["version"]; ok {
			if _, ok := obj["version"]; !ok {
				return validation(path+".version", path+".version is required and must be 1")
			}
		}
		for _, k := range keys {
			if e := r.props[k].check(path+"."+k, obj[k]); e != nil {
				return e
			}
		}
	case kindVersion:
		if n, ok := numberOf(v); !ok || n.Cmp(big.NewRat(1, 1)) != 0 {
			return bad("1")
		}
	case kindInteger, kindNumber:
		n, ok := numberOf(v)
		if !ok || (r.kind == kindInteger && !n.IsInt()) || (r.min != nil && n.Cmp(r.min) < 0) || (r.max != nil && n.Cmp(r.max) > 0) {
			what := "a number"
			if r.kind == kindInteger {
				what = "an integer"
			}
			if r.max != nil {
				return bad(fmt.Sprintf("%s from %s to %s", what, r.min.RatString(), r.max.RatString()))
			}
			return bad(fmt.Sprintf("%s of at least %s", what, r.min.RatString()))
		}
	case kindString:
		var s string
		if jsonType(v) != "string" || json.Unmarshal(v, &s) != nil {
			return bad("a string")
		}
		if r.enum != nil && !slices.Contains(r.enum, s) {
			return bad("one of " + strings.Join(r.enum, ", "))
		}
	case kindStringMap:
		var m map[string]json.RawMessage
		if jsonType(v) != "object" || json.Unmarshal(v, &m) != nil {
			return bad("an object of strings")
		}
		for _, x := range m {
			if jsonType(x) != "string" {
				return bad("an object of strings")
			}
		}
	case kindOpenObject:
		if jsonType(v) != "object" {
			return bad("an object")
		}
	case kindStringSet:
		// Each entry is checked a string: a null decoded into a string
		// would read as "" and be persisted, and served, as null.
		var raw []json.RawMessage
		var l []string
		if jsonType(v) != "array" || json.Unmarshal(v, &raw) != nil {
			return bad("an array of distinct strings")
		}
		for _, x := range raw {
			var s string
			if jsonType(x) != "string" || json.Unmarshal(x, &s) != nil {
				return bad("an array of distinct strings")
			}
			l = append(l, s)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(l)))) != len(l) {
			return bad("an array of distinct strings")
		}
	case kindExtensions:
		var m map[string]json.RawMessage
		if jsonType(v) != "object" || json.Unmarshal(v, &m) != nil {
			return bad("an object of <org>: {…}")
		}
		for _, org := range slices.Sorted(maps.Keys(m)) {
			if !orgKey.MatchString(org) {
				return validation(path+"."+org, fmt.Sprintf("%s.%s: an extensions key is a registered org (lower-case words joined by -)", path, org))
			}
			if jsonType(m[org]) != "object" {
				return validation(path+"."+org, fmt.Sprintf("%s.%s must be an object", path, org))
			}
		}
	}
	return nil
}

// numberOf is v as an exact number, when v is a JSON number.
func numberOf(v json.RawMessage) (*big.Rat, bool) {
	if jsonType(v) != "number" {
		return nil, false
	}
	return new(big.Rat).SetString(string(v))
}

// checkConfigurable validates RunOptions.configurable: first its shape
// (configurableRule: 400 validation_error, details.field the dotted path
// of the offending key, "configurable" for the value itself), then what
// this host advertises, which is no AI provider (no aiProviders in its
// capabilities): ai.provider names no advertised provider (400
// validation_error), ai.credentialRef has no BYOK provider to reference
// (403 credential_forbidden), and ai.mockProvider is refused on every
// credential (403 mock_provider_forbidden): the host has no mock provider,
// and no credential of it is a test key for one.
func checkConfigurable(v json.RawMessage) *apierr.Error {
	if e := configurableRule.check("configurable", v); e != nil {
		return e
	}
	var c struct {
		AI map[string]json.RawMessage `json:"ai"`
	}
	_ = json.Unmarshal(v, &c) // the shape was checked
	switch {
	case c.AI["provider"] != nil:
		return validation("configurable.ai.provider", "configurable.ai.provider must be an advertised AI provider; this host advertises none")
	case c.AI["credentialRef"] != nil:
		return apierr.New(http.StatusForbidden, apierr.CodeCredentialForbidden,
			"configurable.ai.credentialRef must reference a BYOK provider; this host advertises none").WithDetails(map[string]any{"field": "configurable.ai.credentialRef"})
	case c.AI["mockProvider"] != nil:
		return apierr.New(http.StatusForbidden, apierr.CodeMockProviderForbidden,
			"configurable.ai.mockProvider is for test keys of a host with a mock provider; this host has none").WithDetails(map[string]any{"field": "configurable.ai.mockProvider"})
	}
	return nil
}
