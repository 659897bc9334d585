// Package scopeid computes Layer-1 record IDs into a caller's buffer: the
// machinery behind keyspace.ID, shared with the Guard, which cuts a
// request's fingerprint, record ID and owner token from one string.
package scopeid

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// CallerPrefix starts every Layer-1 record ID (keyspace.CallerPrefix).
const CallerPrefix = "caller:v1:"

// Domain separates Layer-1 scope hashes from every other hash idemkit
// computes.
const Domain = "idemkit/idem/caller-scope/v1"

// HashLen is the length of the ID's hash: base64url(sha256) without
// padding.
const HashLen = 43

// Append appends the record ID of (tenantPrefix+tenant, operation, key) to
// dst: CallerPrefix and the base64url SHA-256 of Domain and the three
// parts, each length-prefixed (keyspace.IDPrefixed).
func Append(dst []byte, tenantPrefix, tenant, operation, key string) []byte {
	return AppendMethod(dst, tenantPrefix, tenant, "", operation, key)
}

// AppendMethod is Append with the operation method + " " + operation when
// method is not "" (a route that serves every method scopes a key by the
// request's method too), without building that string: the record ID is
// Append's of the joined operation.
func AppendMethod(dst []byte, tenantPrefix, tenant, method, operation, key string) []byte {
	var buf [256]byte // a message that does not fit moves to the heap
	m := append(buf[:0], Domain...)
	m = binary.BigEndian.AppendUint64(m, uint64(len(tenantPrefix)+len(tenant)))
	m = append(append(m, tenantPrefix...), tenant...)
	if method != "" {
		m = binary.BigEndian.AppendUint64(m, uint64(len(method)+1+len(operation)))
		m = append(append(append(m, method...), ' '), operation...)
	} else {
		m = binary.BigEndian.AppendUint64(m, uint64(len(operation)))
		m = append(m, operation...)
	}
	m = binary.BigEndian.AppendUint64(m, uint64(len(key)))
	m = append(m, key...)
	sum := sha256.Sum256(m)
	return base64.RawURLEncoding.AppendEncode(append(dst, CallerPrefix...), sum[:])
}
