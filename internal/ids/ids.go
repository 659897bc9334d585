// Package ids holds the identifier grammars of OpenWOP v2 (ids.schema.json)
// that idemkit checks in more than one place: the tenantId, the tenant-bound
// ids (runId, effectId: `<tenantId>/<opaque>`), the nodeId and the
// Idempotency-Key grammar that provider keys follow too. Each grammar is
// written here once; the ledger and the reference host validate through it.
package ids

import "strings"

// The grammars, as regular expressions (quoted in error messages).
const (
	// TenantGrammar is the tenantId grammar.
	TenantGrammar = `^(anon:)?[A-Za-z0-9._~-]{1,128}$`
	// MintTenantGrammar is the tenantId grammar without `~`: the tenants
	// a host may mint tenant-bound ids for (ids.schema.json's path
	// projection note forbids minting one holding a `~`).
	MintTenantGrammar = `^(anon:)?[A-Za-z0-9._-]{1,128}$`
	// TenantRule is TenantGrammar in words, for messages.
	TenantRule = "1..128 of A-Z a-z 0-9 . _ ~ - (after an optional anon: prefix)"
	// MintTenantChars names the characters of MintTenantGrammar, for
	// messages.
	MintTenantChars = "A-Z a-z 0-9 . _ - (after an optional anon: prefix)"
	// MintTenantRule is MintTenantGrammar in words, for messages: the
	// length and the characters of a tenant a host may mint ids for.
	MintTenantRule = "1..128 of " + MintTenantChars
	// TenantBoundRule is TenantBoundGrammar in words, for messages.
	TenantBoundRule = "TENANT/ID: a tenant (" + TenantRule + "), a slash, then 16..128 of A-Z a-z 0-9 . _ ~ -"
	// TenantBoundGrammar is the grammar of runId and effectId.
	TenantBoundGrammar = `^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$`
	// NodeGrammar is the nodeId grammar.
	NodeGrammar = `^[A-Za-z0-9._~:-]{1,128}$`
	// KeyGrammar is the OpenWOP Idempotency-Key grammar.
	KeyGrammar = `^[A-Za-z0-9._~-]{22,128}$`
)

// The grammars are checked by the byte matchers below, not by compiled
// regular expressions: compiling the four (their bounded repetitions make
// large programs) cost every function's start about a millisecond and
// half a megabyte before main. TestMatchersAgreeWithTheGrammars holds each
// matcher equal to its grammar.

// ValidTenant reports whether t matches the tenantId grammar.
func ValidTenant(t string) bool { return tenant(t) }

// MintableTenant reports whether t matches MintTenantGrammar: a tenantId
// without `~`, one a host may mint runIds and other tenant-bound ids for.
// The OpenWOP path projection is injective over its own output only, so a
// tenant-bound id holding a literal `~` is the one ambiguous input: a host
// must not mint one. A tenant holding a `~` is still a tenantId (its
// credential authenticates, and its runs minted before stay readable).
func MintableTenant(t string) bool { return tenant(t) && strings.IndexByte(t, '~') < 0 }

// ValidRunID reports whether id matches the tenant-bound runId grammar
// `<tenantId>/<opaque>` (an opaque part of 16 to 128 characters).
func ValidRunID(id string) bool { return tenantBound(id) }

// ValidEffectID reports whether id matches the tenant-bound effectId
// grammar, the same as the runId's.
func ValidEffectID(id string) bool { return tenantBound(id) }

// ValidNodeID reports whether id matches the nodeId grammar.
func ValidNodeID(id string) bool { return Chars(id, ":", 1, 128) }

// ValidKey reports whether k matches the OpenWOP Idempotency-Key grammar
// (KeyGrammar), which the provider keys the ledger derives follow as well.
func ValidKey(k string) bool { return Chars(k, "", 22, 128) }

// tenant matches TenantGrammar: an optional "anon:" and 1 to 128 of
// [A-Za-z0-9._~-] (no ':', so the prefix is never part of the run).
func tenant(t string) bool {
	if len(t) >= 5 && t[:5] == "anon:" {
		t = t[5:]
	}
	return Chars(t, "", 1, 128)
}

// tenantBound matches TenantBoundGrammar: a tenantId, "/", and 16 to 128 of
// [A-Za-z0-9._~-] (no '/' in either part, so the first '/' splits them).
func tenantBound(id string) bool {
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return tenant(id[:i]) && Chars(id[i+1:], "", 16, 128)
		}
	}
	return false
}

// Chars reports whether s is min to max bytes of [A-Za-z0-9._~-] and the
// bytes of extra: the byte matcher of every grammar here, and of the
// ledger's bounds on its other fields.
func Chars(s, extra string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '~', c == '-':
		case strings.IndexByte(extra, c) >= 0:
		default:
			return false
		}
	}
	return true
}
