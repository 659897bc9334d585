package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"mime"
	"net/textproto"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/internal/header"
)

// fingerprintDomain separates request fingerprints from every other hash.
const fingerprintDomain = "idemkit/idem/request/v1"

// pair is one decoded name/value pair. raw marks a query pair whose escapes
// were invalid: it is kept undecoded (whole, in value) and hashed with its
// own tag, so it never equals a decoded pair.
type pair struct {
	name, value string
	raw         bool
}

// requestParts is what the adapters extract for the fingerprint, besides
// the method, the routed operation and the body.
type requestParts struct {
	// params are the concrete path parameters, sorted by name.
	params []pair
	// path is the request path where the route does not determine it,
	// else "".
	path string
	// query is the canonical query string (sorted by name, stable).
	query []pair
	// header returns the values of the request header name (any case).
	header func(name string) []string
}

// paramPairs returns the entries of m sorted by name.
func paramPairs(m map[string]string) []pair {
	if len(m) == 0 {
		return nil
	}
	out := make([]pair, 0, len(m))
	for k, v := range m {
		out = append(out, pair{name: k, value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// parseQuery decodes a raw query string into pairs sorted by name, keeping
// the order of a repeated name's values. A pair whose escapes are invalid
// is kept undecoded and marked, so it can never equal a decoded pair.
func parseQuery(raw string) []pair {
	if raw == "" {
		return nil
	}
	var out []pair
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			out = append(out, pair{name: k, value: part, raw: true})
			continue
		}
		out = append(out, pair{name: dk, value: dv})
	}
	sortPairs(out)
	return out
}

// multiQuery turns decoded multi-value parameters into sorted pairs.
func multiQuery(m map[string][]string) []pair {
	var out []pair
	for k, vs := range m {
		for _, v := range vs {
			out = append(out, pair{name: k, value: v})
		}
	}
	// Each name's values were appended consecutively and in order, so a
	// stable sort by name keeps them in order.
	sortPairs(out)
	return out
}

// singleQuery turns decoded single-value parameters into sorted pairs.
func singleQuery(m map[string]string) []pair { return paramPairs(m) }

func sortPairs(p []pair) {
	sort.SliceStable(p, func(i, j int) bool { return p[i].name < p[j].name })
}

// methodOverrideHeaders are the headers with which a client tunnels a
// method through POST (a method-override middleware inside the Guard
// serves the request as the method they name), in canonical form.
var methodOverrideHeaders = [...]string{"X-Http-Method", "X-Http-Method-Override", "X-Method-Override"}

// methodOverride appends to dst the method-override headers the request
// sends (methodOverrideHeaders) that its route does not declare among its
// fingerprint headers (declared, canonical and sorted), as name and value
// count then values, for the fingerprint; nothing when it sends none: the
// method a handler serves the request as is in the fingerprint, so a POST
// tunnelling DELETE and one tunnelling PUT (or none) are two requests,
// never one answer (RED_TEAM 314). A header whose every value names the
// request's own method (in any case) changes nothing a handler serves and
// is left out, so such a request keeps the fingerprint it had before
// (RED_TEAM 335). With dst on the caller's stack, it allocates nothing for
// up to its capacity.
func methodOverride(dst []string, in *request, declared []string) []string {
	if in.v2Tenant != nil && in.v2Absent&rareOverride != 0 {
		return dst // none sent: the HTTP API event's headers were read once (v2Headers)
	}
	for _, name := range methodOverrideHeaders {
		if slices.Contains(declared, name) {
			continue
		}
		at := len(dst)
		dst = append(dst, name, "")
		dst = in.appendHeaderValues(dst, name)
		vs := dst[at+2:]
		own := true
		for _, v := range vs {
			own = own && strings.EqualFold(v, in.method)
		}
		if own { // none sent, or each naming the request's method
			dst = dst[:at]
			continue
		}
		dst[at+1] = strconv.Itoa(len(vs))
	}
	return dst
}

// fingerprintSum computes the hash of the request fingerprint of in under
// the operation id op, given its body digest, the media type its body is
// read as (bodyMediaType) and the headers its route declares; the
// fingerprint is that hash stamped with canon.RecipeRequest (appendStamp).
func fingerprintSum(in *request, op string, bodyDigest []byte, media bool, headers []string) [sha256.Size]byte {
	var ob [12]string
	override := methodOverride(ob[:0], in, headers)
	bp := msgPool.Get().(*[]byte)
	m := append((*bp)[:0], fingerprintDomain...)
	m = appendStr(m, in.method)
	m = appendStr(m, op)
	p := &in.parts
	m = appendTag(m, 'p', len(p.params))
	for _, kv := range p.params {
		m = appendStr(m, kv.name)
		m = appendStr(m, kv.value)
	}
	m = appendStr(m, p.path)
	m = appendTag(m, 'q', len(p.query))
	for _, kv := range p.query {
		if kv.raw {
			m = appendTag(m, 'u', 0)
		} else {
			m = appendTag(m, 'd', 0)
		}
		m = appendStr(m, kv.name)
		m = appendStr(m, kv.value)
	}
	m = appendTag(m, 'h', len(headers))
	for _, name := range headers {
		vs := in.headerValues(name)
		m = appendStr(m, name)
		m = appendTag(m, 'v', len(vs))
		for _, v := range vs {
			m = appendStr(m, v)
		}
	}
	m = appendStr(m, bodyDigest)
	if media {
		// After the body digest, and only when there is one (every
		// earlier part is length-prefixed, so a message with it never
		// equals one without): a request without it keeps the
		// fingerprint it had before RED_TEAM 313.
		m = appendBodyMediaType(m, in)
		// Likewise only when sent: the body's content codings, which
		// the handler undoes before it reads the body (RED_TEAM 463).
		m = appendBodyCodings(m, in, headers)
	}
	if len(override) > 0 {
		// Likewise after everything else, and only when sent.
		m = appendTag(m, 'o', len(override))
		for _, s := range override {
			m = appendStr(m, s)
		}
	}
	sum := sha256.Sum256(m)
	if cap(m) <= maxPooledMsg {
		*bp = m[:0]
		msgPool.Put(bp)
	}
	return sum
}

// appendBodyCodings appends to m the tag 'c', the count and the content
// codings of the request's body (Content-Encoding, each value split at
// commas, trimmed, in lower case, identity left out, in order), on a
// route whose handler reads the body by its headers (fingerprintSum's
// media), when there are any and the route does not declare
// Content-Encoding among its fingerprint headers; nothing otherwise, so a
// request sent uncoded keeps the fingerprint it always had. The Guard
// hashes such a body's bytes as sent: without its codings, the same bytes
// sent as a gzip file uncoded and sent gzip-coded (which the handler reads
// as the file's contents) were one request, and the second was answered
// the first one's answer (RED_TEAM 463). With dst on the stack it
// allocates nothing for a request without codings.
func appendBodyCodings(m []byte, in *request, declared []string) []byte {
	if len(in.body) == 0 || in.v2Tenant != nil && in.v2Absent&rareEncoding != 0 {
		return m
	}
	if slices.Contains(declared, "Content-Encoding") {
		return m // in the fingerprint as a declared header already
	}
	var vb [4]string
	vs := in.appendHeaderValues(vb[:0], "Content-Encoding")
	n := 0
	for _, v := range vs {
		for c := range strings.SplitSeq(v, ",") {
			if c = trimASCIISpace(c); c != "" && !strings.EqualFold(c, "identity") {
				n++
			}
		}
	}
	if n == 0 {
		return m
	}
	m = appendTag(m, 'c', n)
	for _, v := range vs {
		for c := range strings.SplitSeq(v, ",") {
			if c = trimASCIISpace(c); c != "" && !strings.EqualFold(c, "identity") {
				m = binary.BigEndian.AppendUint64(m, uint64(len(c)))
				m = appendLowerASCII(m, c)
			}
		}
	}
	return m
}

// bodyMediaType is the media type a request's body is read as, for the
// fingerprint (fingerprintSum), on a route whose handler reads the body by
// its Content-Type (no Route.JSON, no Contract): "" for no body, no
// Content-Type, or a JSON body sent as application/json (the fingerprints
// those requests always had); the type and subtype alone, in lower case,
// for any other JSON type ("application/merge-patch+json": the same bytes
// as a JSON Patch or as a merge patch are two requests, as the JCS body
// digest cannot tell); for a JSON type labelled with a charset other
// than UTF-8, the type and subtype and that charset, in lower case
// ("application/json; charset=iso-8859-1"); the whole media type, its parameters sorted, its
// type, names and charset in lower case, for a body read as bytes (a
// form, text in one charset or another, multipart under one boundary or
// another). A Content-Type that does not parse as a media type is kept as
// sent, trimmed and in lower case.
func bodyMediaType(in *request) string {
	ct := strings.TrimSpace(in.contentType)
	if len(in.body) == 0 || ct == "" {
		return ""
	}
	if header.IsJSON(ct) {
		mt, _, _ := strings.Cut(ct, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if _, rest, _ := strings.Cut(ct, ";"); jsonOtherCharset(rest) {
			// A JSON body labelled in another charset: a handler that
			// reads the label reads other text from the same bytes
			// (RED_TEAM 464). A label that does not parse is kept as
			// sent, as for any other type.
			_, params, err := mime.ParseMediaType(ct)
			if err != nil {
				return strings.ToLower(ct)
			}
			if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
				return mt + "; charset=" + strings.ToLower(cs)
			}
		}
		if mt == "application/json" {
			return ""
		}
		return mt
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(ct)
	}
	if cs, ok := params["charset"]; ok {
		params["charset"] = strings.ToLower(cs)
	}
	if f := mime.FormatMediaType(mt, params); f != "" {
		return f
	}
	return strings.ToLower(ct)
}

// appendBodyMediaType appends to m the tag 'm' and the media type
// bodyMediaType gives for in, as appendStr writes it, or nothing when that
// is "". A Content-Type of ASCII tokens (a type and subtype, parameters
// name=value) is put in its canonical form in m itself (appendMediaType),
// so that a replay of a form or of text in a charset allocates no more
// than one of JSON (RED_TEAM 334); any other is parsed by bodyMediaType.
func appendBodyMediaType(m []byte, in *request) []byte {
	if in.contentType == "application/json" {
		return m // the usual type as the usual client writes it: "" (bodyMediaType)
	}
	ct := strings.TrimSpace(in.contentType)
	if len(in.body) == 0 || ct == "" {
		return m
	}
	start := len(m)
	m = append(m, 'm')
	m = binary.BigEndian.AppendUint64(m, 0)
	n0 := len(m)
	m, ok := appendMediaType(m, ct)
	if !ok {
		m = append(m[:n0], bodyMediaType(in)...)
	}
	if len(m) == n0 {
		return m[:start]
	}
	binary.BigEndian.PutUint64(m[n0-8:n0], uint64(len(m)-n0))
	return m
}

// appendMediaType appends to m what bodyMediaType gives for the trimmed
// Content-Type ct, without allocating, when ct is ASCII tokens alone: a
// type and a subtype, then at most four parameters name=value whose names
// differ in more than case and carry no '*' (RFC 2231). ok false, m
// unchanged, for any other (a quoted value, non-ASCII, a malformed one),
// which bodyMediaType parses.
func appendMediaType(m []byte, ct string) (_ []byte, ok bool) {
	n0 := len(m)
	for i := 0; i < len(ct); i++ {
		if ct[i] >= 0x80 {
			return m, false
		}
	}
	base, rest, _ := strings.Cut(ct, ";")
	base = trimASCIISpace(base)
	major, sub, slash := strings.Cut(base, "/")
	if !slash || !isTokenStr(major) || !isTokenStr(sub) {
		return m, false
	}
	if header.IsJSON(ct) {
		if jsonOtherCharset(rest) {
			return m, false // bodyMediaType keeps the charset (RED_TEAM 464)
		}
		if strings.EqualFold(base, "application/json") {
			return m, true
		}
		return appendLowerASCII(m, base), true
	}
	var names, values [4]string
	n := 0
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, ";")
		name, value, eq := strings.Cut(seg, "=")
		name, value = trimASCIISpace(name), trimASCIISpace(value)
		if !eq || n == len(names) || !isTokenStr(name) || !isTokenStr(value) || strings.IndexByte(name, '*') >= 0 {
			return m, false
		}
		for i := range n {
			if strings.EqualFold(names[i], name) {
				return m, false
			}
		}
		// Insertion in order of the names in lower case, as
		// mime.FormatMediaType writes them.
		i := n
		for ; i > 0 && lessFold(name, names[i-1]); i-- {
			names[i], values[i] = names[i-1], values[i-1]
		}
		names[i], values[i] = name, value
		n++
	}
	m = appendLowerASCII(m, base)
	for i := range n {
		m = append(m, "; "...)
		m = appendLowerASCII(m, names[i])
		m = append(m, '=')
		if strings.EqualFold(names[i], "charset") {
			m = appendLowerASCII(m, values[i])
		} else {
			m = append(m, values[i]...)
		}
	}
	if len(m) == n0 {
		return m, false
	}
	return m, true
}

// jsonOtherCharset reports whether the parameters rest of a JSON media
// type (after its first ';') may name a charset other than UTF-8: a
// charset parameter whose value is not the token utf-8 in some case (a
// quoted one included, which bodyMediaType unquotes). A JSON body in no
// charset or in UTF-8 keeps the fingerprint it always had.
func jsonOtherCharset(rest string) bool {
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, ";")
		name, value, _ := strings.Cut(seg, "=")
		if strings.EqualFold(trimASCIISpace(name), "charset") && !strings.EqualFold(trimASCIISpace(value), "utf-8") {
			return true
		}
	}
	return false
}

// trimASCIISpace trims the ASCII white space around s.
func trimASCIISpace(s string) string {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' }
	for s != "" && isSpace(s[0]) {
		s = s[1:]
	}
	for s != "" && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// isTokenStr reports whether s is a non-empty RFC 2045 token.
func isTokenStr(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// appendLowerASCII appends s, in lower case, to m.
func appendLowerASCII(m []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		m = append(m, c)
	}
	return m
}

// lessFold reports whether a sorts before b in lower case (ASCII).
func lessFold(a, b string) bool {
	lower := func(c byte) byte {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if x, y := lower(a[i]), lower(b[i]); x != y {
			return x < y
		}
	}
	return len(a) < len(b)
}

// The fingerprint message is built in a pooled buffer and hashed once: the
// same bytes as writing each part to a running hash, without allocating.
const maxPooledMsg = 64 << 10

var msgPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendStr appends s with its length as 8 bytes, big-endian, in front.
func appendStr[T ~string | ~[]byte](m []byte, s T) []byte {
	m = binary.BigEndian.AppendUint64(m, uint64(len(s)))
	return append(m, s...)
}

// appendTag appends a tag byte and the count n as 8 bytes, big-endian.
func appendTag(m []byte, tag byte, n int) []byte {
	m = append(m, tag)
	return binary.BigEndian.AppendUint64(m, uint64(n))
}

// canonicalHeaders returns the declared header names in canonical form,
// sorted and without duplicates.
func canonicalHeaders(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, textproto.CanonicalMIMEHeaderKey(n))
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// patternPath reports whether a ServeMux pattern leaves the path open: no
// pattern, or one that matches a whole subtree (its path ends in "/").
func patternPath(pattern string) bool {
	return pattern == "" || strings.HasSuffix(pattern, "/")
}

// patternParams returns the wildcard names of a ServeMux pattern
// ("POST example.com/orders/{id}/items/{rest...}" -> id, rest), excluding
// the end-of-path marker {$}.
func patternParams(pattern string) []string {
	var out []string
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			return out
		}
		name := strings.TrimSuffix(pattern[i+1:i+j], "...")
		if name != "$" && name != "" {
			out = append(out, name)
		}
		pattern = pattern[i+j+1:]
	}
}
