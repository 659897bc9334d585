// Package ids holds the identifier grammars of OpenWOP v2 (ids.schema.json)
// that idemkit checks in more than one place: the tenantId, the tenant-bound
// ids (runId, effectId: `<tenantId>/<opaque>`), the nodeId and the
// Idempotency-Key grammar that provider keys follow too. Each grammar is
// written here once; the ledger and the reference host validate through it.
package ids

import "regexp"

// The grammars, as regular expressions (quoted in error messages).
const (
	// TenantGrammar is the tenantId grammar.
	TenantGrammar = `^(anon:)?[A-Za-z0-9._~-]{1,128}$`
	// TenantBoundGrammar is the grammar of runId and effectId.
	TenantBoundGrammar = `^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$`
	// NodeGrammar is the nodeId grammar.
	NodeGrammar = `^[A-Za-z0-9._~:-]{1,128}$`
	// KeyGrammar is the OpenWOP Idempotency-Key grammar.
	KeyGrammar = `^[A-Za-z0-9._~-]{22,128}$`
)

var (
	tenantRe      = regexp.MustCompile(TenantGrammar)
	tenantBoundRe = regexp.MustCompile(TenantBoundGrammar)
	nodeRe        = regexp.MustCompile(NodeGrammar)
	keyRe         = regexp.MustCompile(KeyGrammar)
)

// ValidTenant reports whether t matches the tenantId grammar.
func ValidTenant(t string) bool { return tenantRe.MatchString(t) }

// ValidRunID reports whether id matches the tenant-bound runId grammar
// `<tenantId>/<opaque>` (an opaque part of 16 to 128 characters).
func ValidRunID(id string) bool { return tenantBoundRe.MatchString(id) }

// ValidEffectID reports whether id matches the tenant-bound effectId
// grammar, the same as the runId's.
func ValidEffectID(id string) bool { return tenantBoundRe.MatchString(id) }

// ValidNodeID reports whether id matches the nodeId grammar.
func ValidNodeID(id string) bool { return nodeRe.MatchString(id) }

// ValidKey reports whether k matches the OpenWOP Idempotency-Key grammar
// (KeyGrammar), which the provider keys the ledger derives follow as well.
func ValidKey(k string) bool { return keyRe.MatchString(k) }
