package apifn

import (
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// CodeProtocolVersionUnsupported is the registry code of a request whose
// OpenWOP-Version does not name a major this host serves (406).
const CodeProtocolVersionUnsupported = "protocol_version_unsupported"

// HeaderVersion is the header a client names the protocol version it
// speaks with, and every answer carries.
const HeaderVersion = "OpenWOP-Version"

// VersionRefusal is the answer to a request whose OpenWOP-Version header
// does not select a major in the discovery document's protocolVersions
// (today only major 2): 406 protocol_version_unsupported with
// details.protocolVersions listing what is served. values are the header's
// values as received (repeated headers may be joined with commas); every
// comma-separated member, stripped of the optional whitespace HTTP allows
// around it, must be MAJOR or MAJOR.MINOR (decimal, no leading zeros, the
// grammar of protocolVersions[] with the minor optional: versioning.md
// §1.3 makes a host accept `2` and `2.0` alike) and name a served major.
// The minor is informational, so "2", "2.0", "2.21" and "2.99" are all
// served; a member that is not of that form ("2.x", "2.21.0", "v2") names
// no version, and like an unlisted one it is refused 406 — the one answer
// the protocol gives the header (openapi.yaml: "unlisted ⇒ 406"). A header
// that is absent or blank selects the served major, and nil is returned. The api handler applies it on every route before
// anything else; `idemkit dev`'s gateway applies it to the routes it serves
// itself (the conformance seams) in the same place.
func VersionRefusal(values []string) *apierr.Error {
	served, _ := majorOf(settings.ProtocolVersion)
	for _, v := range values {
		for _, member := range strings.Split(v, ",") {
			member = strings.Trim(member, " \t")
			if member == "" {
				continue
			}
			major, ok := majorOf(member)
			if ok && major == served {
				continue
			}
			if !ok {
				return apierr.New(http.StatusNotAcceptable, CodeProtocolVersionUnsupported,
					"OpenWOP-Version %q is not a version (MAJOR or MAJOR.MINOR, e.g. %s); this host serves %s", member, settings.ProtocolVersion, settings.ProtocolVersion).
					WithDetails(map[string]any{"protocolVersions": []string{settings.ProtocolVersion}})
			}
			return apierr.New(http.StatusNotAcceptable, CodeProtocolVersionUnsupported,
				"OpenWOP-Version %q names a major this host does not serve; it serves %s", member, settings.ProtocolVersion).
				WithDetails(map[string]any{"protocolVersions": []string{settings.ProtocolVersion}})
		}
	}
	return nil
}

// majorOf is the major of a version MAJOR or MAJOR.MINOR (each part 0 or
// decimal digits without a leading zero) and whether v is of that form.
func majorOf(v string) (string, bool) {
	major, minor, dotted := strings.Cut(v, ".")
	if !versionNumber(major) || (dotted && !versionNumber(minor)) {
		return "", false
	}
	return major, true
}

// versionNumber reports whether s is `0|[1-9][0-9]*`.
func versionNumber(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// versionRefusal is VersionRefusal over an API Gateway header map.
func versionRefusal(h map[string]string) *apierr.Error {
	return VersionRefusal(header.Values(h, HeaderVersion))
}
