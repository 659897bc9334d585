package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
)

// createMembers are the members of a createRun body: the createRun fields
// and the RunOptions fields of the OpenWOP v2 OpenAPI document, whose
// composition closes the body (unevaluatedProperties: false). The host
// acts on workflowId and inputs, and on scopeId under
// `OpenWOP-Dedup: enforce` (CreateRequest.ScopeID); the body's tenantId is checked against the
// credential's tenant before the body is parsed (idem.Config.BodyTenantField).
var createMembers = []string{
	"workflowId", "inputs", "residency", "tenantId", "scopeId", "callbackUrl",
	"mode", "evalSuiteRef", "agentId",
	"configurable", "tags", "metadata",
}

// Limits of RunOptions.tags: a tag's format is never refused, its count
// and length are.
const (
	maxTags     = 100
	maxTagChars = 256
)

// checkCreateMembers refuses a createRun body with a member outside
// createMembers (400 validation_error, details.field naming the first such
// member in sorted order), and RunOptions of the wrong shape: tags an
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
	if t, ok := raw["tags"]; ok {
		var tags []string
		ok := json.Unmarshal(t, &tags) == nil && tags != nil && len(tags) <= maxTags
		for i := 0; ok && i < len(tags); i++ {
			ok = utf8.RuneCountInString(tags[i]) <= maxTagChars
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
	return opts, nil
}
