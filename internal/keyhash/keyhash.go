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
	"log/slog"
	"strings"
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

// opaqueLen is the length of the opaque part of an effect id and of a
// provider key: 43 base64url characters (an unpadded SHA-256).
const opaqueLen = 43

// providerKeyPrefix begins every provider idempotency key
// (identity.ProviderKey).
const providerKeyPrefix = "idemkit-"

// RedactEffects returns s with every effect id in it (a tenant, "/", and
// 43 base64url characters: the shape of every effect id the ledger's
// recipes compute) and every provider key ("idemkit-" and 43 base64url
// characters) replaced by its Log hash. The provider key is a public
// derivation of the effect id, so a log line that carries either lets
// whoever reads it present the effect's key to the provider; the ledger's
// error texts name the effect, and hosts log them through RedactEffects.
// Run ids (22 characters after the "/") are left as they are.
func RedactEffects(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		var from, to int
		switch {
		case s[i] == '/' && run(s, i+1) == opaqueLen:
			// An effect id: the tenant runs back from the "/".
			from, to = i, i+1+opaqueLen
			for from > last && tenantChar(s[from-1]) {
				from--
			}
			if from >= last+5 && s[from-5:from] == "anon:" {
				from -= 5
			}
			if from == i {
				continue // no tenant
			}
		case strings.HasPrefix(s[i:], providerKeyPrefix) && (i == 0 || !base64URLChar(s[i-1])) &&
			run(s, i+len(providerKeyPrefix)) == opaqueLen:
			from, to = i, i+len(providerKeyPrefix)+opaqueLen
		default:
			continue
		}
		b.WriteString(s[last:from])
		b.WriteString(Log(s[from:to]))
		last, i = to, to-1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// ErrAttr is the "error" attribute of a log line reporting err: its text
// with every effect id and provider key replaced by its Log hash
// (RedactEffects). The ledger's errors name the effect, and the provider
// idempotency key is a public derivation of the effect id.
func ErrAttr(err error) slog.Attr {
	return slog.String("error", RedactEffects(err.Error()))
}

// run is the number of base64url characters in s from i on.
func run(s string, i int) int {
	n := 0
	for i+n < len(s) && base64URLChar(s[i+n]) {
		n++
	}
	return n
}

func base64URLChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// tenantChar reports whether c may be part of a tenant id ([A-Za-z0-9._~-]).
func tenantChar(c byte) bool { return base64URLChar(c) || c == '.' || c == '~' }
