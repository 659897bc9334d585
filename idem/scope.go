package idem

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"
)

// scopeDomain separates Layer-1 scope hashes from every other hash idemkit
// computes.
const scopeDomain = "idemkit/idem/caller-scope/v1"

const scopeHashLen = 43 // base64url(sha256) without padding

// ScopeID returns the record ID for (tenant, operation, key). It is
// injective over its inputs (each part is length-prefixed) and never
// contains the raw key.
func ScopeID(tenant, operation, key string) string {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(scopeDomain))
	for _, p := range [...]string{tenant, operation, key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	return CallerPrefix + base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
}

// IsCallerID reports whether id has the shape of a ScopeID result: the
// caller-keyspace prefix followed by exactly one base64url SHA-256. Stores
// use it to refuse any other ID.
func IsCallerID(id string) bool {
	rest, ok := strings.CutPrefix(id, CallerPrefix)
	if !ok || len(rest) != scopeHashLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	// The last character of a 32-byte base64url value encodes 4 bits of
	// data and 2 zero bits.
	return strings.IndexByte("AEIMQUYcgkosw048", rest[scopeHashLen-1]) >= 0
}

// credentialScope extends a tenant scope with the policy's credential parts
// (Policy.Scope.Credential): every name and value is length-prefixed, and
// the "tenant+:" prefix differs from every scope without credential parts
// ("tenant:", "anon:"), so two different credentials never share a scope.
func credentialScope(tenant string, names, values []string) string {
	var b strings.Builder
	b.WriteString("tenant+:")
	for _, s := range append([]string{tenant}, interleave(names, values)...) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

func interleave(names, values []string) []string {
	out := make([]string, 0, 2*len(names))
	for i := range names {
		out = append(out, names[i], values[i])
	}
	return out
}
