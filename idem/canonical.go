package idem

import (
	"context"
	"crypto/sha256"
	"errors"
	"github.com/idemkit/idemkit/idem/canon"

	"github.com/idemkit/idemkit/internal/apierr"
)

// Contract is a route's request contract. On a route that has one, a keyed
// request's digest is its canonical request hash, taken after decode,
// normalisation, validation and tenant resolution: Decode turns the body
// into the normalised, validated request, and the policy's Canonical
// picks what of it and of the resolved scope is hashed. Two bodies that
// decode to the same request — the same work order sent as JSON and as
// XML, or with other spacing or member order — share a digest and replay
// each other; the raw bytes are kept only as Record.RawBodySHA256.
type Contract struct {
	// Version is the endpoint contract version, hashed with the request, so
	// a new contract version never replays an answer of the old one.
	// Required.
	Version string

	// Decode decodes a body of the given media type (the Content-Type's
	// media type, lower-cased, without parameters; "" when there is none;
	// the body is UTF-8: a Content-Type naming another charset, or one that
	// cannot be parsed, is refused 400 validation_error before Decode runs,
	// see canon.MediaType),
	// normalises and validates it, and returns the request as a value
	// encoding/json can marshal. It runs before the claim, so a refused body
	// records nothing: ErrUnsupportedMediaType (wrapped) is answered
	// 415 unsupported_media_type; any other error 400 validation_error,
	// naming the field of a *canon.ValidationError. Required.
	Decode func(mediaType string, body []byte) (any, error)

	// Render, if set, renders a response of this route for the request's
	// Accept header: the stored response is the logical one the handler
	// returned, and every answer built from it — the first execution's and
	// every replay — is rendered per the Accept of the request it answers
	// (a JSON original replayed with Accept: application/xml comes back as
	// XML). Render must not fail on a response it cannot convert: it returns
	// it unchanged. The Guard's own error answers are not rendered. Default
	// nil: responses are returned as stored.
	Render func(resp *Response, accept string) *Response
}

func (c *Contract) validate() error {
	switch {
	case c.Version == "":
		return errors.New("missing Version (required)")
	case c.Decode == nil:
		return errors.New("missing Decode (required)")
	}
	return nil
}

// contractDigest decodes the body under contract c, hashes it with the
// policy's Canonical and returns the canon.RecipeCanonical digest and the
// decoded request; a refused body is the error answer to give.
func contractDigest(c *Contract, form func(canon.Request) ([]byte, error), in *request, scope canon.Scope) (string, any, *apierr.Error) {
	mt, err := canon.MediaType(in.contentType)
	var req any
	if err == nil {
		req, err = c.Decode(mt, in.userBody())
	}
	if err != nil {
		var ve *canon.ValidationError
		switch {
		case errors.Is(err, ErrUnsupportedMediaType):
			return "", nil, apierr.New(415, apierr.CodeUnsupportedMediaType, "The request body's media type is not accepted on this route.")
		case errors.As(err, &ve) && ve.Field != "":
			return "", nil, apierr.New(400, apierr.CodeValidation, "The request body is invalid: %s", ve.Message).
				WithDetails(map[string]any{"field": ve.Field})
		case errors.As(err, &ve):
			return "", nil, apierr.New(400, apierr.CodeValidation, "The request body is invalid: %s", ve.Message)
		}
		return "", nil, apierr.New(400, apierr.CodeValidation, "The request body is invalid.")
	}
	if form == nil {
		form = canon.Default
	}
	b, err := form(canon.Request{Request: req, ContractVersion: c.Version, Scope: scope})
	if err != nil {
		return "", nil, apierr.New(400, apierr.CodeValidation, "The request body is invalid: %s", err.Error())
	}
	return stamp(canon.RecipeCanonical, sha256.Sum256(b)), req, nil
}

// decodedKey carries the decoded request to the handler.
type decodedKey struct{}

// DecodedRequest returns, in a handler, the request its route's
// Contract.Decode produced (decoded, normalised and validated, the value
// the canonical request hash was taken of), so the handler does not decode
// the body again; ok is false outside a claim on a route with a Contract
// (a route without one, a skipped route, a request that runs without a
// key).
func DecodedRequest(ctx context.Context) (any, bool) {
	v := ctx.Value(decodedKey{})
	return v, v != nil
}

// render applies the route's Contract.Render to resp for accept.
func render(route Route, resp *Response, accept string) *Response {
	return renderContract(route.Contract, resp, accept)
}

// renderContract is render for a route whose Contract is c (nil: none).
func renderContract(c *Contract, resp *Response, accept string) *Response {
	if c == nil || c.Render == nil || resp == nil {
		return resp
	}
	out := c.Render(resp, accept)
	if out == nil {
		return resp
	}
	return out
}

// canonicalFunc returns the policy's Canonical, or canon.Default when it names none.
func (g *Guard) canonicalFunc() func(canon.Request) ([]byte, error) {
	if g.cfg.Policy.Canonical != nil {
		return g.cfg.Policy.Canonical
	}
	return canon.Default
}
