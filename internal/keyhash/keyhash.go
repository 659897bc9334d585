// Package keyhash renders secrets (idempotency keys, provider keys, API keys)
// safe for logs: a keyed, truncated HMAC-SHA-256. By default (Log, or New
// with no secret) the key is a per-process random salt: the same secret
// hashes equal within one process, so log lines can be correlated, but the
// hash cannot be reversed or correlated across processes. With an operator's
// secret (New(secret)), every process holding the same secret hashes a value
// identically, so one key can be followed across instances; without the
// secret the hash still cannot be reversed.
package keyhash

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// salt is drawn from crypto/rand at the first Log, not at package init:
// the first read of the system's randomness is a start-up cost every
// process linking this package paid before main. sync.OnceValue makes the
// draw happen once, whichever goroutines ask first.
var salt = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("keyhash: no randomness: " + err.Error())
	}
	return b
})

// Hasher hashes secrets for logs under one key. The zero value hashes under
// the per-process salt, as Log does.
type Hasher struct{ key []byte }

// New returns a Hasher keyed by secret, or by the per-process random salt
// (as Log) when secret is "".
func New(secret string) *Hasher {
	if secret == "" {
		return &Hasher{}
	}
	// Domain-separated, so the log hash never equals an HMAC the operator's
	// secret may key elsewhere.
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("idemkit keyhash v1"))
	return &Hasher{key: m.Sum(nil)}
}

// Log returns the 12-hex-character keyed hash of s, prefixed "kh:".
func (h *Hasher) Log(s string) string {
	key := h.key
	if key == nil {
		key = salt()
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return "kh:" + hex.EncodeToString(m.Sum(nil)[:6])
}

// Log returns the 12-hex-character hash of s under the per-process salt,
// prefixed "kh:".
func Log(s string) string { return (&Hasher{}).Log(s) }
