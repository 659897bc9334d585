package client

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
)

// NewKey returns a fresh idempotency key: a random UUIDv4 in canonical form
// (36 characters; crypto/rand fills the 122 random bits). OpenWOP names this
// form as satisfying its 128-bit entropy requirement. It matches both the
// OpenWOP grammar ^[A-Za-z0-9._~-]{22,128}$ and the ERP policy's grammar
// (8..128 of A-Z a-z 0-9 . _ : -). NewCompactKey carries a full 128 bits.
func NewKey() string {
	var b [16]byte
	mustRead(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// NewCompactKey returns a fresh idempotency key of 128 random bits encoded as
// unpadded base64url: exactly 22 characters, the shortest key the OpenWOP
// grammar accepts.
func NewCompactKey() string {
	var b [16]byte
	mustRead(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// DeriveKey returns a deterministic idempotency key for a business event,
// so that every process that retries the event (a restarted process, a queue
// redelivery, another machine) sends the same key: for example
// DeriveKey("checkout", cartID). The parts are joined unambiguously (a part
// may hold any bytes, NUL included) and hashed (SHA-256), and the digest is encoded as 43 characters of unpadded base64url,
// inside both the OpenWOP and the ERP policy's key grammars. Use one set of parts
// per intent: a new purchase by the same customer is a new business event and
// needs different parts.
func DeriveKey(parts ...string) string {
	h := sha256.New()
	if !slices.ContainsFunc(parts, func(p string) bool { return strings.IndexByte(p, 0) >= 0 }) {
		// Each part after a NUL: unambiguous while no part holds one (the
		// keys every version has derived for such parts).
		h.Write([]byte("idemkit:client:derived-key:v1"))
		for _, p := range parts {
			h.Write([]byte{0})
			h.Write([]byte(p))
		}
	} else {
		// A part holds a NUL: each part after its length, under another
		// domain, so that it never meets a key of the form above.
		h.Write([]byte("idemkit:client:derived-key:v2"))
		for _, p := range parts {
			h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
			h.Write([]byte(p))
		}
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

type keyCtx struct{}

// WithKey returns a context carrying the idempotency key to use, instead of a
// minted one, for every mutating call made with it: use one such context per
// logical call (business event), never for two different intents. An
// Idempotency-Key header set on the request itself takes precedence. An empty
// key is ignored.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

func keyFrom(ctx context.Context) string {
	k, _ := ctx.Value(keyCtx{}).(string)
	return strings.TrimSpace(k)
}

func mustRead(b []byte) {
	// crypto/rand.Read never returns an error on supported platforms (Go 1.24+
	// crashes the program instead); the check is defensive.
	if _, err := rand.Read(b); err != nil {
		panic("client: no randomness: " + err.Error())
	}
}
