package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
)

// Built-in workflows: fixtures that users and the test suites rely on.
const (
	// WorkflowNoop has no nodes and no effects; the run succeeds.
	WorkflowNoop = "conformance-noop"
	// WorkflowDelay holds createRun's answer for inputs.delayMs (0..10000)
	// before responding, which opens an in-flight window; no effects.
	WorkflowDelay = "conformance-delay"
	// WorkflowUnavailable answers createRun 503 runner_unavailable and
	// creates nothing.
	WorkflowUnavailable = "conformance-unavailable"
	// WorkflowWebhook has one node, NodeDeliver, which POSTs inputs.payload
	// as JSON to inputs.url through the ledger (see Webhook). Optional
	// inputs.businessKey keys the effect on the business event instead of
	// the run (see WebhookIdentity).
	WorkflowWebhook = "webhook"
)

// NodeDeliver is the webhook workflow's only node.
const NodeDeliver = "deliver"

// WebhookOperation is the business operation of a webhook effect keyed on
// inputs.businessKey (identity.Business.Operation).
const WebhookOperation = "webhook"

// maxBusinessKeyBytes bounds the webhook workflow's inputs.businessKey.
const maxBusinessKeyBytes = 256

// maxDelayMs bounds conformance-delay's inputs.delayMs.
const maxDelayMs = 10000

// CodeRunnerUnavailable is the registry code of conformance-unavailable's 503.
const CodeRunnerUnavailable = "runner_unavailable"

// Workflows lists the built-in workflow ids.
var Workflows = []string{WorkflowNoop, WorkflowDelay, WorkflowUnavailable, WorkflowWebhook, WorkflowReplayOrdinalLoop, WorkflowReplaySideEffect}

// CreateRequest is a validated createRun body.
type CreateRequest struct {
	WorkflowID string
	// Inputs is the inputs object as received ("{}" when absent).
	Inputs json.RawMessage
	// DelayMs is conformance-delay's hold.
	DelayMs int
	// URL and Payload are the webhook workflow's inputs (Payload "null"
	// when absent).
	URL     string
	Payload json.RawMessage
	// BusinessKey is the webhook workflow's optional inputs.businessKey
	// ("" when absent).
	BusinessKey string
	// Options are the body's RunOptions (configurable, tags, metadata),
	// validated and compacted, to be persisted on the run; zero when the
	// body has none.
	Options runs.Options
	// ScopeID is the body's scopeId member as received (nil when absent):
	// acted on only under `OpenWOP-Dedup: enforce`, which validates it.
	ScopeID json.RawMessage
}

func validation(field, msg string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "%s", msg).WithDetails(map[string]any{"field": field})
}

// ParseCreate validates a createRun body against the built-in workflows and
// the webhook policy. The body is closed: a member outside the createRun
// and RunOptions fields is refused (checkCreateMembers). Errors are 400
// validation_error (or 400 webhook_url_rejected for a destination the
// policy refuses).
func ParseCreate(body []byte, policy *WebhookPolicy) (CreateRequest, *apierr.Error) {
	var req CreateRequest
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil || dec.More() {
		return req, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object")
	}
	opts, e := checkCreateMembers(raw)
	if e != nil {
		return req, e
	}
	req.Options = opts
	req.ScopeID = raw["scopeId"]
	wf, ok := raw["workflowId"]
	if !ok || json.Unmarshal(wf, &req.WorkflowID) != nil || req.WorkflowID == "" {
		return req, validation("workflowId", "workflowId is required and must be a non-empty string")
	}
	known := SeamWorkflow(req.WorkflowID) // refused by the api unless the seams are on
	for _, w := range Workflows {
		known = known || w == req.WorkflowID
	}
	if !known {
		return req, validation("workflowId", "unknown workflowId; built-in workflows: "+strings.Join(Workflows, ", "))
	}
	inputs := map[string]json.RawMessage{}
	req.Inputs = json.RawMessage("{}")
	if in, ok := raw["inputs"]; ok {
		// An object (the schema's type), never null: absent is {}.
		if json.Unmarshal(in, &inputs) != nil || inputs == nil {
			return req, validation("inputs", "inputs must be a JSON object")
		}
		req.Inputs = in
	}
	if g, ok := GraphOf(req.WorkflowID); ok {
		if e := parseGraphInputs(&req, g, inputs, policy); e != nil {
			return req, e
		}
		return req, nil
	}
	switch req.WorkflowID {
	case WorkflowDelay:
		if d, ok := inputs["delayMs"]; ok {
			var n json.Number
			// json.Number also accepts a quoted string ("5"): require a
			// bare JSON number.
			if len(d) == 0 || d[0] == '"' || json.Unmarshal(d, &n) != nil {
				return req, validation("inputs.delayMs", "inputs.delayMs must be an integer 0..10000")
			}
			i, err := n.Int64()
			if err != nil || i < 0 || i > maxDelayMs {
				return req, validation("inputs.delayMs", "inputs.delayMs must be an integer 0..10000")
			}
			req.DelayMs = int(i)
		}
	case WorkflowWebhook:
		u, ok := inputs["url"]
		if !ok || json.Unmarshal(u, &req.URL) != nil || req.URL == "" {
			return req, validation("inputs.url", "inputs.url is required and must be a string")
		}
		if err := policy.CheckURL(req.URL); err != nil {
			return req, apierr.New(http.StatusBadRequest, apierr.CodeWebhookURLRejected, "%s", err.Error()).
				WithDetails(map[string]any{"field": "inputs.url"})
		}
		req.Payload = json.RawMessage("null")
		if p, ok := inputs["payload"]; ok {
			req.Payload = p
		}
		if bk, ok := inputs["businessKey"]; ok {
			if json.Unmarshal(bk, &req.BusinessKey) != nil || checkBusinessKey(req.BusinessKey) != nil {
				return req, validation("inputs.businessKey", fmt.Sprintf(
					"inputs.businessKey must be a non-empty string of at most %d bytes without NUL", maxBusinessKeyBytes))
			}
			if _, err := webhookDigest(req.URL, req.Payload); err != nil {
				return req, validation("inputs.payload", "inputs.payload must be canonicalizable JSON (RFC 8785), every number one a double holds exactly, with inputs.businessKey")
			}
		}
	}
	return req, nil
}

var errBusinessKey = errors.New("invalid inputs.businessKey")

// checkBusinessKey validates inputs.businessKey: non-empty, at most
// maxBusinessKeyBytes bytes, no NUL.
func checkBusinessKey(k string) error {
	if k == "" || len(k) > maxBusinessKeyBytes || strings.IndexByte(k, 0) >= 0 {
		return errBusinessKey
	}
	return nil
}

// webhookBusinessKey extracts the webhook workflow's optional
// inputs.businessKey from a run's stored inputs: "" and no error when
// absent; an error when present but not a valid business key (a run stored
// without ParseCreate's validation).
func webhookBusinessKey(inputs json.RawMessage) (string, error) {
	in, err := inputMembers(inputs)
	if err != nil {
		return "", err
	}
	var bk *string
	if raw, ok := in["businessKey"]; ok {
		if err := json.Unmarshal(raw, &bk); err != nil {
			return "", err
		}
	}
	if bk == nil {
		return "", nil
	}
	if err := checkBusinessKey(*bk); err != nil {
		return "", err
	}
	return *bk, nil
}

// inputMembers reads a run's stored inputs object into its members by
// their exact names, as ParseCreate read them (RED_TEAM 443): Go's struct
// decoding matches member names case-insensitively, so "URL" or
// "BusinessKey", never checked at createRun, would choose the delivery's
// destination or identity.
func inputMembers(inputs json.RawMessage) (map[string]json.RawMessage, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(inputs, &in); err != nil {
		return nil, err
	}
	return in, nil
}

// webhookInputs extracts the webhook workflow's url and payload from a
// run's stored inputs.
func webhookInputs(inputs json.RawMessage) (url string, payload json.RawMessage, err error) {
	in, err := inputMembers(inputs)
	if err != nil {
		return "", nil, err
	}
	if raw, ok := in["url"]; ok {
		if err := json.Unmarshal(raw, &url); err != nil {
			return "", nil, err
		}
	}
	payload = in["payload"]
	if payload == nil {
		payload = json.RawMessage("null")
	}
	return url, payload, nil
}
