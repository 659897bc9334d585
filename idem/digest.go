package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/idemkit/idemkit/idem/canon"
	"strings"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/jcs"
	"github.com/idemkit/idemkit/internal/jsonerr"
)

func stamp(recipe string, sum [sha256.Size]byte) string {
	var b [64 + 43]byte
	return string(appendStamp(b[:0], recipe, sum))
}

// appendStamp appends recipe + ":" + base64url(sum), the form of every
// digest, to dst.
func appendStamp(dst []byte, recipe string, sum [sha256.Size]byte) []byte {
	dst = append(dst, recipe...)
	dst = append(dst, ':')
	return base64.RawURLEncoding.AppendEncode(dst, sum[:])
}

// rawBodySHA256 returns the lowercase hex form of sum, the SHA-256 of a
// raw request body, as stored beside the digest in Record.RawBodySHA256
// (the ERP policy's raw_body_sha256, kept for archive only).
func rawBodySHA256(sum *[sha256.Size]byte) string {
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// digestBytes returns the canon.RecipeBytes digest of body.
func digestBytes(body []byte) string {
	return stamp(canon.RecipeBytes, sha256.Sum256(body))
}

// digestJSON returns the digest of a JSON body: SHA-256 over its RFC 8785
// canonical form, after the normaliser n if not nil. The recipe is
// canon.RecipeJCS, or canon.RecipeJCS+"+"+n.Name. Invalid input fails with an error matching
// ErrInvalidJSON (and the jcs sentinel), including a number whose canonical
// form would change its value: two bodies that differ never share a
// digest unless a normaliser makes them equal.
func digestJSON(body []byte, n *canon.Normalizer) (string, error) {
	var b [64 + 43]byte
	out, _, err := appendDigestJSON(b[:0], body, n, nil)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// appendDigestJSON appends digestJSON(body, n) to dst; on error it returns
// dst unchanged. When the digest's hash is the SHA-256 of body itself (no
// normaliser, and body is its own canonical form) and raw is not nil, it
// stores that hash in *raw and returns true: the raw body's hash without
// a second pass over the body.
func appendDigestJSON(dst, body []byte, n *canon.Normalizer, raw *[sha256.Size]byte) ([]byte, bool, error) {
	if n == nil {
		sum, canonical, err := jcs.Sum256ExactCanonical(body)
		if err != nil {
			return dst, false, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
		}
		if canonical && raw != nil {
			*raw = sum
		}
		return appendStamp(dst, canon.RecipeJCS, sum), canonical && raw != nil, nil
	}
	d, err := normalizedDigest(body, n)
	if err != nil {
		return dst, false, err
	}
	return append(dst, d...), false, nil
}

// normalizedDigest is digestJSON for a body with a normaliser.
func normalizedDigest(body []byte, n *canon.Normalizer) (string, error) {
	form, err := jcs.CanonicalizeExact(body)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	dec := json.NewDecoder(bytes.NewReader(form))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	for _, path := range n.Exclude {
		v = exclude(v, path)
	}
	if n.Func != nil {
		if v, err = n.Func(v); err != nil {
			return "", fmt.Errorf("%w: normaliser %s: %w", ErrInvalidJSON, n.Name, err)
		}
	}
	// Exact, as the body is: a number the normaliser produces whose
	// canonical form has another value (an integer beyond ±(2^53-1)) is
	// refused, never hashed equal to its neighbour.
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: normaliser %s output: %w", ErrInvalidJSON, n.Name, err)
	}
	out, err := jcs.CanonicalizeExact(raw)
	if err != nil {
		return "", fmt.Errorf("%w: normaliser %s output: %w", ErrInvalidJSON, n.Name, err)
	}
	return stamp(canon.RecipeJCS+"+"+n.Name, sha256.Sum256(out)), nil
}

// exclude removes the member named by path (a top-level name or a JSON
// Pointer) from v.
func exclude(v any, path string) any {
	if !strings.HasPrefix(path, "/") {
		if m, ok := v.(map[string]any); ok {
			delete(m, path)
		}
		return v
	}
	parts := strings.Split(path[1:], "/")
	cur := v
	for i, p := range parts {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			if a, isArr := cur.([]any); isArr {
				var idx int
				if _, err := fmt.Sscanf(p, "%d", &idx); err != nil || idx < 0 || idx >= len(a) || fmt.Sprint(idx) != p {
					return v
				}
				if i == len(parts)-1 {
					return v // removing array elements would shift indexes; not supported
				}
				cur = a[idx]
				continue
			}
			return v
		}
		if i == len(parts)-1 {
			delete(m, p)
			return v
		}
		cur = m[p]
	}
	return v
}

// invalidJSON is the 400 validation_error for a body digestJSON refused
// (jsonerr.Refusal: the answer a host gives the same body).
func invalidJSON(body []byte, err error) *apierr.Error { return jsonerr.Refusal(body, err) }
