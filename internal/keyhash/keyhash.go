// Package keyhash renders secrets (idempotency keys, provider keys, API keys)
// safe for logs: a keyed, truncated HMAC-SHA-256 with a per-process random
// salt. The same key hashes equal within one process, so log lines can be
// correlated, but the hash cannot be reversed or correlated across processes.
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

// Log returns the 12-hex-character keyed hash of s, prefixed "kh:".
func Log(s string) string {
	m := hmac.New(sha256.New, salt())
	m.Write([]byte(s))
	return "kh:" + hex.EncodeToString(m.Sum(nil)[:6])
}
