package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
)

// createMembers are the members of a createRun body: the createRun fields
// and the RunOptions fields of the OpenWOP v2 OpenAPI document, whose
// composition closes the body (unevaluatedProperties: false). The host
// acts on workflowId and inputs, on scopeId under
// `OpenWOP-Dedup: enforce` (CreateRequest.ScopeID), and on mode only to
// refuse an eval-suite run; the body's tenantId must be a string
// (CheckTenantID) and is checked against the credential's tenant before the
// body is parsed (idem.Config.BodyTenantField).
var createMembers = []string{
	"workflowId", "inputs", "residency", "tenantId", "scopeId", "callbackUrl",
	"mode", "evalSuiteRef", "agentId",
	"configurable", "tags", "metadata",
}

// ModeEval is the one value of createRun's mode: an eval-suite run, which
// needs CapabilityEvalSuite.
const ModeEval = "eval"

// CapabilityEvalSuite is the capability an eval-suite run needs; this host
// does not advertise it, so a createRun with mode "eval" is 422
// capability_required naming it in details.requiredCapability.
const CapabilityEvalSuite = "agents.evalSuite"

// Limits of RunOptions.tags: a tag's format is never refused, its count
// and length are.
const (
	maxTags     = 100
	maxTagChars = 256
)

// CheckTenantID refuses the tenantId member of a createRun body (raw, its
// members) when present and not a JSON string, null included: 400
// validation_error naming it (the createRun schema's type string). A
// tenantId of another type is a malformed request, not another tenant, so
// the api checks it before comparing the body's tenant with the
// credential's (403 forbidden for a string naming another tenant).
func CheckTenantID(raw map[string]json.RawMessage) *apierr.Error {
	v, ok := raw["tenantId"]
	if !ok {
		return nil
	}
	var str *string
	if json.Unmarshal(v, &str) != nil || str == nil {
		return validation("tenantId", "tenantId must be a string (the credential's tenant)")
	}
	return nil
}

// checkCreateMembers refuses a createRun body with a member outside
// createMembers (400 validation_error, details.field naming the first such
// member in sorted order); tenantId that is not a string (CheckTenantID);
// callbackUrl that is not a string, scopeId, evalSuiteRef or agentId that
// is not a non-empty string, and mode other than "eval"
// (400 validation_error naming it); mode "eval" (422 capability_required,
// CapabilityEvalSuite); residency as checkResidency says; and RunOptions of the wrong shape: tags an
// array of at most maxTags strings of at most maxTagChars characters each,
// metadata an object, configurable as checkConfigurable says; each not
// valid UTF-8 is refused too. It returns the RunOptions to persist on the
// run, each compacted.
func checkCreateMembers(raw map[string]json.RawMessage) (runs.Options, *apierr.Error) {
	var opts runs.Options
	var unknown []string
	for name := range raw {
		if !slices.Contains(createMembers, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return opts, validation(unknown[0], fmt.Sprintf("unknown member %q: the createRun body is closed (workflowId, inputs, residency, tenantId, scopeId, callbackUrl, mode, evalSuiteRef, agentId, configurable, tags, metadata)", unknown[0]))
	}
	if e := CheckTenantID(raw); e != nil {
		return opts, e
	}
	for _, m := range []struct {
		name     string
		nonEmpty bool
	}{{"callbackUrl", false}, {"evalSuiteRef", true}, {"agentId", true}, {"scopeId", true}} {
		v, ok := raw[m.name]
		if !ok {
			continue
		}
		var str *string
		if json.Unmarshal(v, &str) != nil || str == nil || (*str == "" && m.nonEmpty) {
			what := "a string"
			if m.nonEmpty {
				what = "a non-empty string"
			}
			return opts, validation(m.name, m.name+" must be "+what)
		}
	}
	if m, ok := raw["mode"]; ok {
		var mode *string
		if json.Unmarshal(m, &mode) != nil || mode == nil || *mode != ModeEval {
			return opts, validation("mode", `mode must be "eval" (an eval-suite run) or absent (a workflow run)`)
		}
		// This host does not advertise agents.evalSuite: an eval-suite run
		// is refused, never run as a workflow run.
		return opts, apierr.New(http.StatusUnprocessableEntity, apierr.CodeCapabilityRequired,
			`mode "eval" needs the agents.evalSuite capability, which this host does not advertise`).
			WithDetails(map[string]any{"requiredCapability": CapabilityEvalSuite})
	}
	if t, ok := raw["tags"]; ok {
		// *string: a null entry is not a string (decoded into a string it
		// would read as "" and be persisted, and served, as null).
		var tags []*string
		ok := json.Unmarshal(t, &tags) == nil && tags != nil && len(tags) <= maxTags
		for i := 0; ok && i < len(tags); i++ {
			ok = tags[i] != nil && utf8.RuneCountInString(*tags[i]) <= maxTagChars
		}
		if !ok {
			return opts, validation("tags", fmt.Sprintf("tags must be an array of at most %d strings of at most %d characters", maxTags, maxTagChars))
		}
	}
	if m, ok := raw["metadata"]; ok {
		var obj map[string]json.RawMessage
		if json.Unmarshal(m, &obj) != nil || obj == nil {
			return opts, validation("metadata", "metadata must be a JSON object")
		}
	}
	if c, ok := raw["configurable"]; ok {
		if e := checkConfigurable(c); e != nil {
			return opts, e
		}
	}
	for _, o := range []struct {
		name string
		to   *json.RawMessage
	}{{"configurable", &opts.Configurable}, {"tags", &opts.Tags}, {"metadata", &opts.Metadata}} {
		v, ok := raw[o.name]
		if !ok {
			continue
		}
		if !utf8.Valid(v) {
			return opts, validation(o.name, o.name+" must be valid UTF-8")
		}
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return opts, validation(o.name, o.name+" must be valid JSON")
		}
		*o.to = b.Bytes()
	}
	if r, ok := raw["residency"]; ok {
		return opts, checkResidency(r)
	}
	return opts, nil
}

// checkResidency refuses createRun's residency: 400 validation_error
// unless it is {region} with region a non-empty string (the residency
// schema, closed), else 422 residency_unavailable naming the region in
// details.region. This host advertises no dataResidency: it can confine
// no run to a region, and accepting the request while ignoring it would
// let the caller believe its run confined.
func checkResidency(raw json.RawMessage) *apierr.Error {
	var r map[string]json.RawMessage
	var region *string
	if json.Unmarshal(raw, &r) != nil || r == nil || len(r) != 1 || json.Unmarshal(r["region"], &region) != nil || region == nil || *region == "" {
		return validation("residency", `residency must be {"region": "<a region code>"}`)
	}
	return apierr.New(http.StatusUnprocessableEntity, apierr.CodeResidencyUnavailable,
		"this host cannot confine a run to region %q: it advertises no dataResidency; send no residency", *region).
		WithDetails(map[string]any{"region": *region})
}
