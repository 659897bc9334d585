package webhook

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/internal/wireschema"
)

// configurableCase is one RunOptions.configurable value and the host's
// answer to a createRun carrying it: status 0 is accepted, otherwise the
// status, code and details.field of the refusal.
type configurableCase struct {
	value       string
	status      int
	code, field string
	// byHost marks a refusal for what the host advertises (the value is
	// valid under the schema).
	byHost bool
}

var configurableCases = []configurableCase{
	// Accepted: every section and key the schema has.
	{value: `{"version":1}`},
	{value: `{"version":1.0}`},
	{value: `{"version":1,"run":{},"ai":{},"distillation":{},"budget":{},"extensions":{}}`},
	{value: `{"version":1,"run":{"recursionLimit":5,"runTimeoutMs":60000,"maxLoopIterations":1e3,"escalationThreshold":0.25}}`},
	{value: `{"version":1,"run":{"runTimeoutMs":1,"escalationThreshold":1,"recursionLimit":2.0}}`},
	{value: `{"version":1,"ai":{"model":"m","temperature":2,"maxTokens":10,"promptOverrides":{"n1":"p","a.b":"q"},"reasoningVerbosity":"summary","maxRefusals":0}}`},
	{value: `{"version":1,"distillation":{"tokenBudget":1000}}`},
	{value: `{"version":1,"budget":{"maxTokens":1,"maxCostUsd":0,"maxToolCalls":3,"maxRetries":0,"modelAllow":["claude-*"],"modelDeny":[],"thresholdPercent":100,"onExhaustion":"interrupt"}}`},
	{value: `{"version":1,"extensions":{"acme":{"anything":[1,{"x.y":true}]},"my-org2":{}}}`},
	// Not an object, no version, another version.
	{value: `null`, status: 400, code: "validation_error", field: "configurable"},
	{value: `[]`, status: 400, code: "validation_error", field: "configurable"},
	{value: `"x"`, status: 400, code: "validation_error", field: "configurable"},
	{value: `{}`, status: 400, code: "validation_error", field: "configurable.version"},
	{value: `{"run":{}}`, status: 400, code: "validation_error", field: "configurable.version"},
	{value: `{"version":2}`, status: 400, code: "validation_error", field: "configurable.version"},
	{value: `{"version":"1"}`, status: 400, code: "validation_error", field: "configurable.version"},
	{value: `{"version":null}`, status: 400, code: "validation_error", field: "configurable.version"},
	// An unknown root key, a dotted key, an unknown key in a section.
	{value: `{"version":1,"zzz":1}`, status: 400, code: "validation_error", field: "configurable.zzz"},
	{value: `{"version":1,"ai.provider":"x"}`, status: 400, code: "validation_error", field: "configurable.ai.provider"},
	{value: `{"version":1,"run.runTimeoutMs":5}`, status: 400, code: "validation_error", field: "configurable.run.runTimeoutMs"},
	{value: `{"version":1,"recursionLimit":5}`, status: 400, code: "validation_error", field: "configurable.recursionLimit"},
	{value: `{"version":1,"run":{"foo":1}}`, status: 400, code: "validation_error", field: "configurable.run.foo"},
	{value: `{"version":1,"ai":{"model":"m","provider.name":"x"}}`, status: 400, code: "validation_error", field: "configurable.ai.provider.name"},
	{value: `{"version":1,"distillation":{"maxTokens":1}}`, status: 400, code: "validation_error", field: "configurable.distillation.maxTokens"},
	{value: `{"version":1,"budget":{"maxTokenz":1}}`, status: 400, code: "validation_error", field: "configurable.budget.maxTokenz"},
	// A section of the wrong type.
	{value: `{"version":1,"run":"x"}`, status: 400, code: "validation_error", field: "configurable.run"},
	{value: `{"version":1,"ai":null}`, status: 400, code: "validation_error", field: "configurable.ai"},
	{value: `{"version":1,"extensions":[]}`, status: 400, code: "validation_error", field: "configurable.extensions"},
	// Out-of-range or mistyped values.
	{value: `{"version":1,"run":{"runTimeoutMs":0}}`, status: 400, code: "validation_error", field: "configurable.run.runTimeoutMs"},
	{value: `{"version":1,"run":{"runTimeoutMs":-5}}`, status: 400, code: "validation_error", field: "configurable.run.runTimeoutMs"},
	{value: `{"version":1,"run":{"runTimeoutMs":1.5}}`, status: 400, code: "validation_error", field: "configurable.run.runTimeoutMs"},
	{value: `{"version":1,"run":{"runTimeoutMs":"60000"}}`, status: 400, code: "validation_error", field: "configurable.run.runTimeoutMs"},
	{value: `{"version":1,"run":{"recursionLimit":0}}`, status: 400, code: "validation_error", field: "configurable.run.recursionLimit"},
	{value: `{"version":1,"run":{"escalationThreshold":1.01}}`, status: 400, code: "validation_error", field: "configurable.run.escalationThreshold"},
	{value: `{"version":1,"ai":{"temperature":2.5}}`, status: 400, code: "validation_error", field: "configurable.ai.temperature"},
	{value: `{"version":1,"ai":{"temperature":true}}`, status: 400, code: "validation_error", field: "configurable.ai.temperature"},
	{value: `{"version":1,"ai":{"model":5}}`, status: 400, code: "validation_error", field: "configurable.ai.model"},
	{value: `{"version":1,"ai":{"maxTokens":0}}`, status: 400, code: "validation_error", field: "configurable.ai.maxTokens"},
	{value: `{"version":1,"ai":{"reasoningVerbosity":"loud"}}`, status: 400, code: "validation_error", field: "configurable.ai.reasoningVerbosity"},
	{value: `{"version":1,"ai":{"promptOverrides":{"n":1}}}`, status: 400, code: "validation_error", field: "configurable.ai.promptOverrides"},
	{value: `{"version":1,"ai":{"maxRefusals":-1}}`, status: 400, code: "validation_error", field: "configurable.ai.maxRefusals"},
	{value: `{"version":1,"ai":{"mockProvider":"on"}}`, status: 400, code: "validation_error", field: "configurable.ai.mockProvider"},
	{value: `{"version":1,"distillation":{"tokenBudget":0}}`, status: 400, code: "validation_error", field: "configurable.distillation.tokenBudget"},
	{value: `{"version":1,"budget":{"maxCostUsd":-0.01}}`, status: 400, code: "validation_error", field: "configurable.budget.maxCostUsd"},
	{value: `{"version":1,"budget":{"thresholdPercent":101}}`, status: 400, code: "validation_error", field: "configurable.budget.thresholdPercent"},
	{value: `{"version":1,"budget":{"modelAllow":["a","a"]}}`, status: 400, code: "validation_error", field: "configurable.budget.modelAllow"},
	{value: `{"version":1,"budget":{"modelDeny":[1]}}`, status: 400, code: "validation_error", field: "configurable.budget.modelDeny"},
	{value: `{"version":1,"budget":{"modelDeny":[null]}}`, status: 400, code: "validation_error", field: "configurable.budget.modelDeny"},
	{value: `{"version":1,"budget":{"modelAllow":["a",null]}}`, status: 400, code: "validation_error", field: "configurable.budget.modelAllow"},
	{value: `{"version":1,"budget":{"onExhaustion":"stop"}}`, status: 400, code: "validation_error", field: "configurable.budget.onExhaustion"},
	{value: `{"version":1,"extensions":{"Acme":{}}}`, status: 400, code: "validation_error", field: "configurable.extensions.Acme"},
	{value: `{"version":1,"extensions":{"acme.x":{}}}`, status: 400, code: "validation_error", field: "configurable.extensions.acme.x"},
	{value: `{"version":1,"extensions":{"acme-":{}}}`, status: 400, code: "validation_error", field: "configurable.extensions.acme-"},
	{value: `{"version":1,"extensions":{"acme":1}}`, status: 400, code: "validation_error", field: "configurable.extensions.acme"},
	// Valid in shape, refused by this host, which advertises no AI
	// providers (aiProviders) and so no BYOK and no mock provider.
	{value: `{"version":1,"ai":{"provider":"openai"}}`, status: 400, code: "validation_error", field: "configurable.ai.provider", byHost: true},
	{value: `{"version":1,"ai":{"credentialRef":"cred-1"}}`, status: 403, code: "credential_forbidden", field: "configurable.ai.credentialRef", byHost: true},
	{value: `{"version":1,"ai":{"mockProvider":{}}}`, status: 403, code: "mock_provider_forbidden", field: "configurable.ai.mockProvider", byHost: true},
}

// TestParseCreateConfigurable: RunOptions.configurable is checked at
// create against configurable.schema.json's rules (closed, nested,
// versioned: version required and 1; an unknown root key, a dotted key or
// an unknown key inside a section refused, with details.field naming it;
// every typed key in range), then against what the host advertises: a
// provider not among aiProviders is 400 validation_error, a credentialRef
// without BYOK 403 credential_forbidden, a mockProvider 403
// mock_provider_forbidden. An accepted value is kept (compacted) on the
// request.
func TestParseCreateConfigurable(t *testing.T) {
	p := &WebhookPolicy{}
	for _, c := range configurableCases {
		req, e := ParseCreate([]byte(`{"workflowId":"conformance-noop","configurable":`+c.value+`}`), p)
		switch {
		case c.status == 0 && e != nil:
			t.Errorf("%s: %v, want accepted", c.value, e)
		case c.status == 0 && string(req.Options.Configurable) != c.value:
			t.Errorf("%s: kept %s", c.value, req.Options.Configurable)
		case c.status != 0 && (e == nil || e.Status != c.status || e.Code != c.code || e.Details["field"] != c.field):
			t.Errorf("%s: %v, want %d %s on %s", c.value, e, c.status, c.code, c.field)
		}
	}
}

// TestConfigurableCasesFollowTheSchema holds the cases above to the real
// configurable.schema.json: every value the host refuses on its shape is
// invalid under the schema, every other value (accepted, or refused for
// what the host advertises) is valid.
func TestConfigurableCasesFollowTheSchema(t *testing.T) {
	s, err := wireschema.Load(t).Schema("configurable.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configurableCases {
		err := wireschema.Validate(s, []byte(c.value))
		var ve *jsonschema.ValidationError
		if err != nil && !errors.As(err, &ve) {
			t.Fatalf("%s: %v", c.value, err)
		}
		shapeRefusal := c.status != 0 && !c.byHost
		if shapeRefusal != (err != nil) {
			t.Errorf("%s: the schema says %v, the host refuses it on shape: %v", c.value, err, shapeRefusal)
		}
	}
}

// TestParseCreateKeepsRunOptions: tags, metadata and configurable are kept
// on the request as received (whitespace between tokens aside); a body
// without them keeps none; a value that is not valid UTF-8 is refused.
func TestParseCreateKeepsRunOptions(t *testing.T) {
	p := &WebhookPolicy{}
	req, e := ParseCreate([]byte(`{"workflowId":"conformance-noop","tags":[ "b", "\u00e9" ,"b"],
		"metadata":{ "z":1.50, "a":[null, 1e2], "big":123456789012345678901234567890, "s":"<&>" },"configurable":{"version":1,"budget":{"modelAllow":[ "a" ,
		"b" ]}}}`), p)
	if e != nil {
		t.Fatal(e)
	}
	if got := string(req.Options.Tags); got != `["b","\u00e9","b"]` {
		t.Errorf("tags kept as %s", got)
	}
	if got := string(req.Options.Metadata); got != `{"z":1.50,"a":[null,1e2],"big":123456789012345678901234567890,"s":"<&>"}` {
		t.Errorf("metadata kept as %s", got)
	}
	if got := string(req.Options.Configurable); got != `{"version":1,"budget":{"modelAllow":["a","b"]}}` {
		t.Errorf("configurable kept as %s", got)
	}
	req, e = ParseCreate([]byte(`{"workflowId":"conformance-noop"}`), p)
	if e != nil || req.Options.Configurable != nil || req.Options.Tags != nil || req.Options.Metadata != nil {
		t.Fatalf("no options: %v %+v", e, req.Options)
	}
	for _, c := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","tags":["` + "\xff" + `"]}`, "tags"},
		{`{"workflowId":"conformance-noop","metadata":{"k":"` + "\xc3" + `"}}`, "metadata"},
		{`{"workflowId":"conformance-noop","configurable":{"version":1,"extensions":{"acme":{"k":"` + "\xfe" + `"}}}}`, "configurable"},
	} {
		if _, e := ParseCreate([]byte(c.body), p); e == nil || e.Status != 400 || e.Details["field"] != c.field {
			t.Errorf("%q: %v, want 400 on %s", strings.ToValidUTF8(c.body, "?"), e, c.field)
		}
	}
}
