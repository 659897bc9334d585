package webhook

import (
	"strings"
	"testing"
)

// TestParseCreateBodyIsClosed: the createRun body is closed (the v2
// OpenAPI document's unevaluatedProperties: false over the createRun fields
// and RunOptions): a member outside them is 400 validation_error naming it
// in details.field, while every member the schema lists is accepted.
func TestParseCreateBodyIsClosed(t *testing.T) {
	p := &WebhookPolicy{}
	for _, b := range []string{
		`{"workflowId":"conformance-noop","zzz":5}`,
		`{"workflowID":"conformance-noop"}`,
		`{"workflowId":"conformance-noop","inputs":{},"input":{}}`,
		`{"workflowId":"conformance-noop","runOptions":{}}`,
	} {
		_, e := ParseCreate([]byte(b), p)
		if e == nil || e.Status != 400 || e.Code != "validation_error" {
			t.Errorf("%s: %v, want 400 validation_error", b, e)
			continue
		}
		if f, _ := e.Details["field"].(string); f == "" || !strings.Contains(b, `"`+f+`"`) || f == "workflowId" || f == "inputs" {
			t.Errorf("%s: details.field %q, want the unknown member", b, f)
		}
	}
	for _, b := range []string{
		`{"workflowId":"conformance-noop"}`,
		`{"workflowId":"conformance-noop","inputs":{},"scopeId":"s","callbackUrl":"https://example.com/cb",` +
			`"configurable":{"version":1},"tags":["a","b"],"metadata":{"k":"v"}}`,
		`{"workflowId":"conformance-noop","tags":[]}`,
		`{"workflowId":"conformance-noop","tags":["` + strings.Repeat("é", 256) + `"]}`,
		`{"workflowId":"conformance-noop","tags":["` + strings.Repeat("t,", 50) + `"]}`,
		`{"workflowId":"conformance-noop","tags":[` + strings.Repeat(`"t",`, 99) + `"t"]}`,
	} {
		if _, e := ParseCreate([]byte(b), p); e != nil {
			t.Errorf("%.120s: %v, want accepted", b, e)
		}
	}
}

// TestParseCreateTagsLimits: tags is an array of strings, at most 100 of at
// most 256 characters each; over the limits, or not an array of strings,
// 400 validation_error with details.field "tags" (a tag's format is never
// refused). metadata is an object.
func TestParseCreateTagsLimits(t *testing.T) {
	p := &WebhookPolicy{}
	for _, c := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","tags":[` + strings.Repeat(`"t",`, 100) + `"t"]}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":["` + strings.Repeat("é", 257) + `"]}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":"a"}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":[1]}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":[null]}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":["a",null]}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":null}`, "tags"},
		{`{"workflowId":"conformance-noop","metadata":[]}`, "metadata"},
		{`{"workflowId":"conformance-noop","metadata":"x"}`, "metadata"},
		{`{"workflowId":"conformance-noop","residency":{}}`, "residency"},
		{`{"workflowId":"conformance-noop","residency":"eu"}`, "residency"},
		{`{"workflowId":"conformance-noop","residency":null}`, "residency"},
		{`{"workflowId":"conformance-noop","residency":{"region":""}}`, "residency"},
		{`{"workflowId":"conformance-noop","residency":{"region":1}}`, "residency"},
		{`{"workflowId":"conformance-noop","residency":{"region":"eu","zone":"a"}}`, "residency"},
	} {
		_, e := ParseCreate([]byte(c.body), p)
		if e == nil || e.Status != 400 || e.Code != "validation_error" || e.Details["field"] != c.field {
			t.Errorf("%.120s: %v, want 400 validation_error on %s", c.body, e, c.field)
		}
	}
}

// TestParseCreateHoldsMembersToTheirSchema: what the host's closed
// createRun schema refuses, ParseCreate refuses (400 validation_error
// naming the member): tenantId not a string (null, a number, a boolean, an
// object, an array), scopeId empty or not a string, inputs not an object
// (null included); a string tenantId, a non-empty scopeId and an object
// inputs are accepted.
func TestParseCreateHoldsMembersToTheirSchema(t *testing.T) {
	p := &WebhookPolicy{}
	for _, c := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","tenantId":null}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":5}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":true}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":{"id":"acme"}}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":["acme"]}`, "tenantId"},
		{`{"workflowId":"conformance-noop","scopeId":""}`, "scopeId"},
		{`{"workflowId":"conformance-noop","scopeId":null}`, "scopeId"},
		{`{"workflowId":"conformance-noop","scopeId":7}`, "scopeId"},
		{`{"workflowId":"conformance-noop","inputs":null}`, "inputs"},
		{`{"workflowId":"conformance-noop","inputs":[]}`, "inputs"},
		{`{"workflowId":"conformance-noop","inputs":"x"}`, "inputs"},
		{`{"workflowId":"webhook","inputs":null}`, "inputs"},
	} {
		_, e := ParseCreate([]byte(c.body), p)
		if e == nil || e.Status != 400 || e.Code != "validation_error" || e.Details["field"] != c.field {
			t.Errorf("%s: %v, want 400 validation_error on %s", c.body, e, c.field)
		}
	}
	for _, b := range []string{
		`{"workflowId":"conformance-noop","tenantId":"acme","scopeId":"s","inputs":{}}`,
		`{"workflowId":"conformance-noop","tenantId":"","scopeId":"x"}`,
	} {
		if _, e := ParseCreate([]byte(b), p); e != nil {
			t.Errorf("%s: %v, want accepted", b, e)
		}
	}
}

// TestParseCreateResidency: this host advertises no dataResidency, so it
// can pin no run to a region: a well-formed residency is refused 422
// residency_unavailable naming the region, never accepted and ignored (a
// caller would believe its run confined). A malformed one is 400 above.
func TestParseCreateResidency(t *testing.T) {
	_, e := ParseCreate([]byte(`{"workflowId":"conformance-noop","residency":{"region":"eu"}}`), &WebhookPolicy{})
	if e == nil || e.Status != 422 || e.Code != "residency_unavailable" || e.Details["region"] != "eu" {
		t.Fatalf("%v, want 422 residency_unavailable with details.region", e)
	}
}
