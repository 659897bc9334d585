// Package canon is the canonical form of a request on a route with a
// Contract: the decoded request and the scope the Guard resolved for it
// (Request, Scope), the default canonical form a policy hashes (Default),
// the refusal a Contract's Decode returns (ValidationError), and the
// normalisation hook for JSON bodies (Normalizer).
//
// Two requests whose canonical forms are equal byte for byte have equal
// digests and so replay one another under the same key; any difference in
// the hashed parts makes the same key a 409 idempotency_key_mismatch, never
// a replay. Forms are RFC 8785 (JCS) JSON, so member order, whitespace and
// number spelling never change a digest.
package canon

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/internal/jcs"
)

// ValidationError is a body a Contract refuses: 400 validation_error with
// details.field set to Field (when not empty).
type ValidationError struct {
	// Field names the refused member (a JSON Pointer such as
	// "/projects/0/code"), or "".
	Field string
	// Message says what is wrong, for the caller.
	Message string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Scope is the scope of a request as the Guard resolved it from the
// credential and the route: what a idem.Policy.Canonical may hash besides the
// request.
type Scope struct {
	// Tenant is the authenticated tenant (idem.Config.Tenant), or "" for an
	// anonymous request (idem.Config.Unauthenticated idem.AnonymousTenant).
	Tenant string
	// Credential holds the further credential values the policy scopes keys
	// by (idem.Policy.Scope.Credential; under the ERP policy the client, the
	// company and the organisation), by name; "" for a part an anonymous
	// request does not carry.
	Credential map[string]string
	// Method is the HTTP method.
	Method string
	// Operation is the canonical operation id (after idem.Config.Operations).
	Operation string
}

// Request is what a idem.Policy.Canonical hashes from.
type Request struct {
	// Request is the decoded, normalised, validated request
	// (idem.Contract.Decode's value).
	Request any
	// ContractVersion is the route's idem.Contract.Version.
	ContractVersion string
	// Scope is the resolved scope.
	Scope Scope
}

// Default is the idem.Policy.Canonical of a policy that names none: the
// RFC 8785 form of {"contract_version", "request"}. The tenant and the
// operation are not in it because they already separate records (the
// scope), and the method and route are in the request fingerprint.
func Default(c Request) ([]byte, error) {
	return Marshal(map[string]any{"contract_version": c.ContractVersion, "request": c.Request})
}

// Marshal is the RFC 8785 (JCS) form of v as encoding/json marshals it.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.CanonicalizeExact(b)
}

// Normalizer is a normalisation hook for JSON bodies (the ERP policy: payloads
// that are semantically equal after normalisation hash equal; named fields
// are excluded). Its Name is stamped into the digest recipe, so changing the
// normalisation means changing the Name.
type Normalizer struct {
	// Name identifies the normalisation in the digest recipe. Required; it
	// may contain only A-Z a-z 0-9 . _ -.
	Name string
	// Exclude lists members removed before hashing: a bare name is a
	// top-level member; a value starting with "/" is an RFC 6901 JSON
	// Pointer ("/meta/requestId"). Missing members are ignored.
	Exclude []string
	// Func, if set, transforms the decoded body after exclusions. It
	// receives encoding/json values with numbers as json.Number and returns
	// the value to canonicalise.
	Func func(v any) (any, error)
}

// Validate reports what is wrong with n: a missing or ill-formed Name.
func (n *Normalizer) Validate() error {
	if n.Name == "" {
		return errors.New("missing Name (required)")
	}
	for i := 0; i < len(n.Name); i++ {
		c := n.Name[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("invalid Name %q: only A-Z a-z 0-9 . _ - allowed", n.Name)
		}
	}
	return nil
}
