package runs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"

	"github.com/idemkit/idemkit/internal/ids"
)

// ErrBadID is returned for a path id that is not a well-formed runId (a bad
// `~` escape, a bad percent escape, or a value outside the runId grammar).
var ErrBadID = errors.New("host: malformed runId")

// ValidTenant reports whether t matches the tenantId grammar.
func ValidTenant(t string) bool { return ids.ValidTenant(t) }

// ValidRunID reports whether id matches the tenant-bound runId grammar
// `<tenantId>/<opaque>`.
func ValidRunID(id string) bool { return ids.ValidRunID(id) }

// RunTenant returns the tenant segment of a well-formed runId.
func RunTenant(id string) string {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return ""
	}
	return id[:i]
}

// NewRunID mints a runId for tenant: tenant + "/" + 22 base64url characters
// (128 random bits). The opaque part never contains `~` (ids.schema.json
// forbids minting one).
func NewRunID(tenant string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("host: no randomness: " + err.Error())
	}
	return tenant + "/" + base64.RawURLEncoding.EncodeToString(b)
}

// ClaimRunID derives the runId of the run created under one Layer-1 claim:
// tenant + "/" + 22 base64url characters (the first 128 bits of
// SHA-256("idemkit:claim-run:v1\0" claimID "\0" originalRequestID)), the same
// shape as NewRunID. claimID is the idempotency record's id
// (idem.ClaimInfo.ID, a hash of tenant, operation and key: never the raw
// key) and originalRequestID the request id the record was first claimed
// with (idem.ClaimInfo.OriginalRequestID), which every reclaim of the
// record keeps and a fresh claim after the record's retention replaces.
//
// Guarantee: every execution of one idempotency record (the first, a
// reclaim after a lost lease or a retryable failure, a stalled owner that
// resumes) names the SAME run, so the run's conditional create can succeed
// at most once per record, even where the run write cannot share a
// transaction with the completion record (no transactions, or a Layer-1
// table in another region). A later record under the same key (after
// retention) names a new run.
func ClaimRunID(tenant, claimID, originalRequestID string) string {
	h := sha256.New()
	h.Write([]byte("idemkit:claim-run:v1\x00"))
	h.Write([]byte(claimID))
	h.Write([]byte{0})
	h.Write([]byte(originalRequestID))
	return tenant + "/" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// ProjectID encodes an id as ONE path segment (the OpenWOP id path projection): bytes in
// [A-Za-z0-9._-] pass through, every other byte becomes `~` and two
// uppercase hex digits (`/` -> `~2F`, `:` -> `~3A`, `~` -> `~7E`).
func ProjectID(id string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('~')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// unprojectID reverses ProjectID: every `~HH` is replaced by its byte; a `~`
// not followed by two hex digits is an error (400 validation_error).
func unprojectID(s string) (string, error) {
	if !strings.Contains(s, "~") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '~' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", ErrBadID
		}
		b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// DecodePathID decodes the raw (still percent-encoded) path segments that
// name a runId into the runId. It accepts the `~` projection (`acme~2Fr1…`,
// the form that survives intermediaries), the percent form (`acme%2Fr1…`)
// and, when a front door decoded `%2F` before routing, the id spread over two
// raw segments. Percent escapes are decoded first; then, in the projection
// only, `~` escapes. The percent and split forms are the id itself (the
// projection never holds a slash), so a `~` there is the id's own, as a
// tenantId may hold one. The result must match the runId grammar.
func DecodePathID(rawSegs ...string) (string, error) {
	projected := len(rawSegs) == 1 && !strings.Contains(rawSegs[0], "%2F") && !strings.Contains(rawSegs[0], "%2f")
	parts := make([]string, 0, len(rawSegs))
	for _, s := range rawSegs {
		p, err := url.PathUnescape(s)
		if err != nil {
			return "", ErrBadID
		}
		if projected {
			if p, err = unprojectID(p); err != nil {
				return "", err
			}
		}
		parts = append(parts, p)
	}
	id := strings.Join(parts, "/")
	if !ValidRunID(id) {
		return "", ErrBadID
	}
	return id, nil
}
