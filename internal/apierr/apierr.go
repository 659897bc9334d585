// Package apierr is the OpenWOP error envelope {error, message, details?}
// shared by every HTTP surface of idemkit. Codes come from
// ../shared/openwop/spec/v2/errors.json; the constants below are the ones
// idemkit emits.
package apierr

import (
	"encoding/json"
	"fmt"
)

// Registry codes used by idemkit (spec/v2/errors.json).
const (
	CodeIdempotencyKeyInvalid  = "idempotency_key_invalid"  // 400
	CodeValidation             = "validation_error"         // 400
	CodeUnauthenticated        = "unauthenticated"          // 401
	CodeForbidden              = "forbidden"                // 403
	CodeCredentialForbidden    = "credential_forbidden"     // 403
	CodeMockProviderForbidden  = "mock_provider_forbidden"  // 403
	CodeIDTenantMismatch       = "id_tenant_mismatch"       // 403
	CodeNotFound               = "not_found"                // 404
	CodeIdempotencyInFlight    = "idempotency_in_flight"    // 409
	CodeIdempotencyKeyMismatch = "idempotency_key_mismatch" // 409
	CodePayloadTooLarge        = "payload_too_large"        // 413
	CodeUnsupportedMediaType   = "unsupported_media_type"   // 415
	CodeRunTerminal            = "run_terminal"             // 409
	CodeRunStateConflict       = "run_state_conflict"       // 409
	CodeRunAlreadyActive       = "run_already_active"       // 409
	CodeWebhookURLRejected     = "webhook_url_rejected"     // 400
	CodeCapabilityRequired     = "capability_required"      // 422
	CodeResidencyUnavailable   = "residency_unavailable"    // 422
)

// Error is an API error: an HTTP status plus the envelope. It implements error.
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"error"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// New returns an *Error.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns a copy of e carrying details.
func (e *Error) WithDetails(d map[string]any) *Error {
	c := *e
	c.Details = d
	return &c
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Body is the JSON envelope.
func (e *Error) Body() []byte {
	b, err := json.Marshal(e)
	if err != nil { // details that cannot be encoded are dropped, never a panic
		b, _ = json.Marshal(&Error{Code: e.Code, Message: e.Message})
	}
	return b
}

// Headers returns the response headers for the envelope.
func (e *Error) Headers() map[string]string {
	return map[string]string{"Content-Type": "application/json"}
}
