package idem

import (
	"context"
	"log/slog"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/contentcoding"
)

// acceptedCoding returns the recorded answer c as the retry in may read
// it. An answer recorded with a content coding (a compression middleware
// inside the Guard encoded it for the request that ran) is answered as
// recorded when in accepts every coding it carries (its Accept-Encoding
// names each, or "*", with a non-zero weight; no Accept-Encoding at all
// accepts any, RFC 9110), else decoded, without its Content-Encoding and
// Content-Length, and without the validators of the coded bytes (the
// digests Content-Digest, Repr-Digest, Digest and Content-MD5 dropped, a
// strong ETag made weak): a retry that does not accept gzip never gets
// gzip, nor a validator of bytes it did not get. A coding the Guard
// cannot undo (br, zstd, compress) leaves c as recorded, logged: place
// such a middleware outside the Guard, where it encodes each answer,
// replays included, for the request it answers. Every replay of a coded
// answer lists Accept-Encoding in Vary (varyAcceptEncoding), since the
// Guard chose it by the retry's Accept-Encoding; c itself is returned
// only when nothing changes. Nothing is read or allocated for an answer
// without a coding.
func (t *txn) acceptedCoding(ctx context.Context, c *Response) *Response {
	ce := c.Headers["Content-Encoding"]
	if len(ce) == 0 || t.in.method == methodEvent {
		return c
	}
	accept := t.in.headerValues("Accept-Encoding")
	codings := strings.Join(ce, ",")
	vary, varies := varyAcceptEncoding(c.Headers["Vary"])
	if len(accept) == 0 || acceptsCodings(strings.Join(accept, ","), codings) {
		return withVary(c, vary, varies)
	}
	body, ok := contentcoding.Decode(c.Body, codings, MaxResponseBytes)
	if !ok {
		t.logf(ctx, slog.LevelWarn, "idempotency: replay of an answer in a content coding the request does not accept and the Guard cannot undo; place the compression middleware outside the Guard",
			slog.String("contentEncoding", codings))
		return withVary(c, vary, varies)
	}
	out := *c
	out.Body = body
	out.Headers = otherBytesHeaders(c.Headers, 1)
	delete(out.Headers, "Content-Encoding")
	out.Headers["Vary"] = vary
	return &out
}

// withVary is c with vary as its Vary values: c itself when varies (c's
// Vary lists Accept-Encoding already), else a copy with its own header map.
func withVary(c *Response, vary []string, varies bool) *Response {
	if varies {
		return c
	}
	out := *c
	out.Headers = make(map[string][]string, len(c.Headers)+1)
	for k, vs := range c.Headers {
		out.Headers[k] = vs
	}
	out.Headers["Vary"] = vary
	return &out
}

// varyAcceptEncoding returns the Vary values vs of a recorded answer as
// a replay chosen by the retry's Accept-Encoding answers them: listing
// Accept-Encoding (RFC 9110 §12.5.5), so that a cache never answers the
// coded replay to a request that does not accept the coding, nor the
// decoded one to every request. varies is true, and vs returned as it
// is, when vs lists Accept-Encoding (in any case) or "*" already;
// otherwise Accept-Encoding is added as a value of its own after vs, in
// a new slice.
func varyAcceptEncoding(vs []string) (vary []string, varies bool) {
	for _, v := range vs {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f == "*" || strings.EqualFold(f, "Accept-Encoding") {
				return vs, true
			}
		}
	}
	return append(slices.Clip(vs), "Accept-Encoding"), false
}

// validatorKind says what becomes of a header when the Guard answers
// other bytes than those it describes (bodyValidator).
type validatorKind uint8

const (
	validatorNone   validatorKind = iota // not a validator of the bytes: kept
	validatorDrop                        // Content-Length and the digests of the bytes
	validatorWeaken                      // ETag: a strong one is made weak
)

// otherBytesHeaders returns a copy of the headers h for an answer whose
// body is other bytes than those h describes (decoded from its content
// coding, or stamped with the request id): Content-Length and the
// digests dropped, a strong ETag made weak (bodyValidator), every other
// header kept. The new map has room for extra more headers.
func otherBytesHeaders(h map[string][]string, extra int) map[string][]string {
	out := make(map[string][]string, len(h)+extra)
	for k, vs := range h {
		switch bodyValidator(k) {
		case validatorDrop:
		case validatorWeaken:
			out[k] = weakETags(vs)
		default:
			out[k] = vs
		}
	}
	return out
}

// bodyValidator says whether the header name describes the exact bytes
// of a body (any letter case), and so what becomes of it over other bytes.
func bodyValidator(name string) validatorKind {
	switch textproto.CanonicalMIMEHeaderKey(name) {
	case "Content-Length", "Content-Digest", "Repr-Digest", "Digest", "Content-Md5":
		return validatorDrop
	case "Etag":
		return validatorWeaken
	}
	return validatorNone
}

// weakETags returns the ETag values vs of a recorded answer as a replay
// of other bytes answers them (decoded from its content coding, or
// stamped with the retry's request id): each strong one made weak (W/
// prefixed), since that body is another representation than the bytes
// they validate (RFC 9110 §8.8.3, as a proxy that decodes an answer
// weakens its ETag); vs itself when every one is weak already.
func weakETags(vs []string) []string {
	var out []string
	for i, v := range vs {
		if t := strings.TrimSpace(v); t != "" && !strings.HasPrefix(t, "W/") {
			if out == nil {
				out = slices.Clone(vs)
			}
			out[i] = "W/" + t
		}
	}
	if out == nil {
		return vs
	}
	return out
}

// acceptsCodings reports whether an Accept-Encoding value accepts every
// content coding in codings (a Content-Encoding value): each is named
// with a non-zero weight (x-gzip as gzip), or not named and "*" is, with
// a non-zero weight. identity is always accepted.
func acceptsCodings(accept, codings string) bool {
	for c := range strings.SplitSeq(codings, ",") {
		c = normCoding(c)
		if c == "" || c == "identity" {
			continue
		}
		named, star := -1.0, -1.0
		for a := range strings.SplitSeq(accept, ",") {
			name, params, _ := strings.Cut(a, ";")
			q := weight(params)
			switch normCoding(name) {
			case c:
				named = q
			case "*":
				star = q
			}
		}
		if named == 0 || named < 0 && star <= 0 {
			return false
		}
	}
	return true
}

// normCoding is a content coding's name as compared: trimmed, lower case,
// x-gzip as gzip.
func normCoding(c string) string {
	c = strings.ToLower(strings.TrimSpace(c))
	if c == "x-gzip" {
		return "gzip"
	}
	return c
}

// weight is the q parameter among an Accept-Encoding member's parameters,
// 1 when absent, 0 when it does not parse.
func weight(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || q < 0 {
				return 0
			}
			return q
		}
	}
	return 1
}

// offeredCodings returns the Accept-Encoding the handler inside the Guard
// sees for a request that sent accept (its values joined): what accept
// accepts (RFC 9110 §12.5.3) less the codings the Guard cannot undo. The
// members naming a coding the Guard can undo (gzip, x-gzip, deflate) or
// identity, and every member refusing a coding (q=0, "*;q=0" included),
// are kept as written, in their order; a member accepting another coding
// (br, zstd, compress) is left out; an accepting "*" stands for the codings
// the Guard undoes that accept does not name, at its weight ("*;q=0.5"
// with gzip named is "deflate;q=0.5"). When what is left accepts nothing
// (the request accepted only codings the Guard cannot undo, say "br,
// *;q=0" or "br, identity;q=0"), the handler sees "identity": it answers
// uncoded, for a middleware outside the Guard to encode; it is never
// offered a header refusing everything when the request accepted
// something. A compression middleware inside the Guard then encodes its
// answer in a coding the Guard reads, so that an error answer's code is
// read (Policy.Cache) and a replay can be decoded for a retry that does
// not accept it (acceptedCoding). changed is false when the handler sees
// accept as it is (an accept refusing everything included); nothing is
// allocated then.
func offeredCodings(accept string) (offered string, changed bool) {
	gzipNamed, deflateNamed := false, false
	for m := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(m, ";")
		switch normCoding(name) {
		case "", "identity":
		case "gzip":
			gzipNamed = true
		case "deflate":
			deflateNamed = true
		default:
			if weight(params) != 0 {
				changed = true
			}
		}
	}
	if !changed {
		return accept, false
	}
	var b strings.Builder
	add := func(m string) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m)
	}
	for m := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(m, ";")
		switch normCoding(name) {
		case "":
			continue
		case "gzip", "deflate", "identity":
		case "*":
			if weight(params) != 0 {
				q := ""
				if p := strings.TrimSpace(params); p != "" {
					q = ";" + p
				}
				if !gzipNamed {
					add("gzip" + q)
				}
				if !deflateNamed {
					add("deflate" + q)
				}
				continue
			}
		default:
			if weight(params) != 0 {
				continue
			}
		}
		add(strings.TrimSpace(m))
	}
	offered = b.String()
	if offered == "" || codingWeight(offered, "gzip") <= 0 && codingWeight(offered, "deflate") <= 0 && codingWeight(offered, "identity") <= 0 {
		return "identity", true
	}
	return offered, true
}

// codingWeight is the weight an Accept-Encoding value gives the content
// coding c (RFC 9110 §12.5.3): its member's when named (x-gzip as gzip),
// else the "*" member's, else 0; identity, when neither names it, is
// acceptable (1). The last member naming it counts.
func codingWeight(accept, c string) float64 {
	named, star := -1.0, -1.0
	for a := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(a, ";")
		switch normCoding(name) {
		case c:
			named = weight(params)
		case "*":
			star = weight(params)
		}
	}
	switch {
	case named >= 0:
		return named
	case star >= 0:
		return star
	case c == "identity":
		return 1
	}
	return 0
}

// codedBody is the 415 unsupported_media_type of a non-empty body sent
// with a content coding other than identity, for a request whose body the
// Guard reads itself (a route with a Contract, a JSON body it
// canonicalises): it reads bodies only uncoded, as the deployable api
// host does, and says so rather than refuse the decoded JSON as invalid
// or read a body labelled br as if it were not. It answers before the
// claim, so nothing is recorded. nil when the body is empty or uncoded.
func codedBody(in *request) *apierr.Error {
	if len(in.body) == 0 || in.v2Tenant != nil && in.v2Absent&rareEncoding != 0 {
		return nil
	}
	for _, v := range in.headerValues("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return apierr.New(415, apierr.CodeUnsupportedMediaType,
					"Content-Encoding %q is not supported for this request's body: send the body uncoded (identity).", c)
			}
		}
	}
	return nil
}
