// Package keyspace maps a caller's Idempotency-Key to the Layer-1 record ID
// it may claim, and tells those IDs from every other.
//
// Host-generated keys never share the caller's keyspace. Every Layer-1
// record ID is CallerPrefix followed by the unpadded base64url SHA-256 of a
// domain-separated, length-prefixed encoding of (tenant, operation, key).
// The caller controls only the key, which is hashed, so no caller-supplied
// key can produce an ID outside this shape, and every Store refuses
// (idem.ErrInvalidRecord) to claim an ID that is not IsCaller. Host
// generated identifiers (locks, fire-once slots, effect identities) are
// never stored in the Layer-1 store at all: they live in the ledger's
// tables. A caller key therefore cannot name, claim or suppress a host lock.
package keyspace

import (
	"strings"

	"github.com/idemkit/idemkit/idem/internal/scopeid"
)

// CallerPrefix starts every Layer-1 record ID.
const CallerPrefix = scopeid.CallerPrefix

// scopeDomain separates Layer-1 scope hashes from every other hash idemkit
// computes.
const scopeDomain = scopeid.Domain

const scopeHashLen = scopeid.HashLen // base64url(sha256) without padding

// ID returns the record ID for (tenant, operation, key). It is
// injective over its inputs (each part is length-prefixed) and never
// contains the raw key.
func ID(tenant, operation, key string) string {
	return IDPrefixed("", tenant, operation, key)
}

// IDPrefixed is ID(tenantPrefix+tenant, operation, key), computed without
// building the concatenation.
func IDPrefixed(tenantPrefix, tenant, operation, key string) string {
	var out [len(CallerPrefix) + scopeHashLen]byte
	return string(scopeid.Append(out[:0], tenantPrefix, tenant, operation, key))
}

// IsCaller reports whether id has the shape of an ID result: the
// caller-keyspace prefix followed by exactly one base64url SHA-256. Stores
// use it to refuse any other ID.
func IsCaller(id string) bool {
	rest, ok := strings.CutPrefix(id, CallerPrefix)
	if !ok || len(rest) != scopeHashLen {
		return false
	}
	// One table lookup a character, without a branch: the characters of a
	// hash are random, so a test per character class mispredicted.
	all := byte(1)
	for i := 0; i < len(rest); i++ {
		all &= base64URL[rest[i]]
	}
	// The last character of a 32-byte base64url value encodes 4 bits of
	// data and 2 zero bits.
	return all == 1 && strings.IndexByte("AEIMQUYcgkosw048", rest[scopeHashLen-1]) >= 0
}

// base64URL is 1 at the base64url alphabet's characters, else 0.
var base64URL = func() (t [256]byte) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		t[c] = 1
	}
	return t
}()
