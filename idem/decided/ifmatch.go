package decided

import (
	"errors"
	"strconv"
	"strings"
)

// The record's version as an entity tag: a client that read a record with
// its strong ETag (VersionETag) may send the version it decided a write
// against as If-Match (RFC 9110) instead of Header; the write
// is checked the same way, and a stale decision refused with the same 409
// CodeStale and fix.

// HeaderIfMatch is the RFC 9110 precondition header carrying the version
// a write was decided against, as the record's strong ETag.
const HeaderIfMatch = "If-Match"

// ErrIfMatchInvalid is returned by Parse for an If-Match that is not
// one strong entity tag of a version (VersionETag), or that names another
// version than Header.
var ErrIfMatchInvalid = errors.New("decided: If-Match is not one strong entity tag of a version of 1 or more")

// VersionETag is the strong entity tag of version v: the decimal version
// in double quotes ("7").
func VersionETag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

// Parse reads the version a write was decided against from the
// values of Header and of If-Match (a VersionETag, or a stamped tag
// "7.stamp" of one representation of version 7, whose version it reads:
// a record whose content also changes without a new version tells its
// representations apart so): either may carry it (a
// request with both is checked only when they agree). "*" in If-Match
// names no version (any current record matches). present is false when
// neither names one: the write is not checked.
func Parse(decided, ifMatch []string) (version int64, present bool, err error) {
	v, present, err := ParseVersion(decided)
	if err != nil {
		return 0, true, err
	}
	if len(ifMatch) == 0 || len(ifMatch) == 1 && strings.TrimSpace(ifMatch[0]) == "*" {
		return v, present, nil
	}
	if len(ifMatch) != 1 {
		return 0, true, ErrIfMatchInvalid
	}
	tag := strings.TrimSpace(ifMatch[0])
	if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return 0, true, ErrIfMatchInvalid // a weak tag (W/"…") or a list never matches strongly
	}
	inner := tag[1 : len(tag)-1]
	if !opaqueTag(inner) {
		return 0, true, ErrIfMatchInvalid // a list ("7.x", "9"), or not one tag
	}
	if i := strings.IndexByte(inner, '.'); i > 0 && i < len(inner)-1 {
		inner = inner[:i] // a stamped tag: its version
	}
	m, _, err := ParseVersion([]string{inner})
	if err != nil || present && m != v {
		return 0, true, ErrIfMatchInvalid
	}
	return m, true, nil
}

// opaqueTag reports whether s is the inside of one entity tag: etagc
// characters only (RFC 9110 §8.8.3: "!", "#".."~" and obs-text), so no
// double quote, space or control character, which a list of tags or a
// value that is no tag would hold.
func opaqueTag(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != 0x21 && (c < 0x23 || c == 0x7f) {
			return false
		}
	}
	return true
}
