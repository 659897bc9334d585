// Package canon is the canonical form of a request on a route with a
// Contract: the decoded request and the scope the Guard resolved for it
// (Request, Scope), the default canonical form a policy hashes (Default),
// the refusal a Contract's Decode returns (ValidationError), the media type
// of a body, which is UTF-8 (MediaType), the
// normalisation hook for JSON bodies (Normalizer), and the recipes a digest
// is stamped with (RecipeJCS, RecipeBytes, RecipeRequest, RecipeCanonical).
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

// The recipes a record's digest is stamped with (idem.Record.Digest is
// "<recipe>:<base64url(SHA-256)>"), so two digests computed by different
// recipes never compare equal, and a new recipe never equals an old one.
const (
	// RecipeJCS hashes the RFC 8785 (JCS) canonical form of a JSON body.
	// With a Normalizer the recipe is RecipeJCS+"+"+Normalizer.Name.
	RecipeJCS = "jcs-sha256-v1"

	// RecipeBytes hashes a non-JSON body as bytes (after base64 decoding of
	// an API Gateway base64 body).
	RecipeBytes = "bytes-sha256-v1"

	// RecipeRequest stamps the request fingerprint stored as a record's Digest.
	// It hashes everything that selects or changes the work:
	//
	//   - the method and the operation id (the routed operation — HTTP API
	//     routeKey, REST method + resource, or the ServeMux pattern — after
	//     idem.Config.Operations mapping, so routes mapped to one operation
	//     id stay one operation);
	//   - the concrete path parameters, sorted by name;
	//   - the request path, only where the route does not determine it: the
	//     HTTP API $default route, a ServeMux pattern that matches a subtree
	//     (ends in "/"), and net/http requests with no pattern at all; and,
	//     behind net/http, the path the client sent where a handler before
	//     the Guard rewrote it (http.StripPrefix);
	//   - the query string, canonicalised: names and values percent-decoded
	//     ('+' is a space), pairs sorted by name, the values of a repeated name
	//     kept in the order they arrived;
	//   - the headers the route declares in idem.Route.Headers (names
	//     case-insensitive, values in order), and no other header;
	//   - the body digest (RecipeJCS, with its normaliser, or RecipeBytes);
	//   - after it, on a route whose handler reads the body by its
	//     Content-Type (no idem.Route.JSON, no idem.Contract), a non-empty
	//     body's media type, unless it is application/json or absent (a
	//     JSON type labelled with a charset other than UTF-8 keeps that
	//     charset), and its content codings other than identity;
	//   - last, a method-override header (X-HTTP-Method-Override,
	//     X-HTTP-Method, X-Method-Override) naming a method other than the
	//     request's own, unless its route declares it.
	//
	// Every part is length-prefixed and counted, so two requests that differ in
	// any part never share a fingerprint: the same key on a different request is
	// 409 idempotency_key_mismatch, never a replay.
	//
	// The last two parts, the content coding, a JSON type's other charset
	// and the path the client sent joined the recipe on 7 December 2026
	// under the same stamp: each is added only where a request carries it,
	// so every other request kept its fingerprint (docs/GUARANTEES.md,
	// "Upgrading across a change of fingerprint", says which retries across
	// that upgrade are refused). The router adapters choose the route's
	// parameters they hand the recipe (a host, a rewritten path), which
	// changed for some requests under the same stamp too. A record written before that for a
	// request carrying one cannot be compared with the earlier recipe's
	// fingerprint: the earlier recipe gave one fingerprint to requests the
	// recipe now tells apart (a JSON Patch and a merge patch of the same
	// bytes), so the record does not say which of them wrote it.
	//
	// A change of what the recipe hashes that changes any request's
	// fingerprint takes a new stamp. A record stamped with an earlier recipe
	// may then be compared with the earlier recipe's fingerprint of the
	// request only where the earlier recipe told apart every two requests the
	// new one does (it hashed at least as much); otherwise a retry of it is
	// 409 idempotency_key_mismatch. Such a comparison belongs in the store's
	// comparison of digests (the Guard is not handed a response on a
	// mismatch, and a reclaim's condition holds the digest). Every store,
	// and the DynamoDB table's conditions, compare a digest as a whole
	// string, so a release that writes a new stamp follows one that reads
	// it: a version that does not know a stamp answers every retry of a
	// record bearing it 409 idempotency_key_mismatch.
	RecipeRequest = "request-sha256-v1"

	// RecipeCanonical stamps the digest of a request on a route with an
	// idem.Contract: SHA-256 over the bytes the policy's Canonical (Default
	// unless it names one) returns for the decoded, normalised and
	// validated Request and its resolved Scope.
	RecipeCanonical = "canonical-sha256-v1"
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
	// the value to canonicalise, exactly as the body is: a number in it
	// whose canonical form has another value (an integer beyond
	// ±(2^53-1), as an int64 or a json.Number) fails the digest
	// (idem.ErrInvalidJSON) rather than being hashed equal to its neighbours.
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
