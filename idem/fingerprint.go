package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/textproto"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/idemkit/idemkit/idem/canon"
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

// fingerprint computes the request fingerprint (canon.RecipeRequest) of in under
// the operation id op, given its body digest and the headers its route
// declares.
func fingerprint(in *request, op, bodyDigest string, headers []string) string {
	h := sha256.New()
	h.Write([]byte(fingerprintDomain))
	writeStr(h, in.method)
	writeStr(h, op)
	p := &in.parts
	writeTag(h, 'p', len(p.params))
	for _, kv := range p.params {
		writeStr(h, kv.name)
		writeStr(h, kv.value)
	}
	writeStr(h, p.path)
	writeTag(h, 'q', len(p.query))
	for _, kv := range p.query {
		if kv.raw {
			writeTag(h, 'u', 0)
		} else {
			writeTag(h, 'd', 0)
		}
		writeStr(h, kv.name)
		writeStr(h, kv.value)
	}
	writeTag(h, 'h', len(headers))
	for _, name := range headers {
		var vs []string
		if p.header != nil {
			vs = p.header(name)
		}
		writeStr(h, name)
		writeTag(h, 'v', len(vs))
		for _, v := range vs {
			writeStr(h, v)
		}
	}
	writeStr(h, bodyDigest)
	var sum [sha256.Size]byte
	return stamp(canon.RecipeRequest, [sha256.Size]byte(h.Sum(sum[:0])))
}

func writeStr(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

func writeTag(h hash.Hash, tag byte, n int) {
	var b [9]byte
	b[0] = tag
	binary.BigEndian.PutUint64(b[1:], uint64(n))
	h.Write(b[:])
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
