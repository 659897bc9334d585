package apifn

import (
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// CodeProtocolVersionUnsupported is the registry code of a request whose
// OpenWOP-Version names a major this host does not serve (406).
const CodeProtocolVersionUnsupported = "protocol_version_unsupported"

// HeaderVersion is the header a client names the protocol version it
// speaks with, and every answer carries.
const HeaderVersion = "OpenWOP-Version"

// VersionRefusal is the answer to a request whose OpenWOP-Version header
// names a major that is not in the discovery document's protocolVersions
// (today only major 2): 406 protocol_version_unsupported with
// details.protocolVersions listing what is served. values are the header's
// values as received (repeated headers may be joined with commas); every
// comma-separated member must name a served major ("2", "2.0" and "2.21"
// all do). A header that is absent or blank selects the served major, and
// nil is returned. The api handler applies it on every route before
// anything else; `idemkit dev`'s gateway applies it to the routes it serves
// itself (the conformance seams) in the same place.
func VersionRefusal(values []string) *apierr.Error {
	served := majorOf(settings.ProtocolVersion)
	for _, v := range values {
		for _, member := range strings.Split(v, ",") {
			member = strings.TrimSpace(member)
			if member == "" || majorOf(member) == served {
				continue
			}
			return apierr.New(http.StatusNotAcceptable, CodeProtocolVersionUnsupported,
				"OpenWOP-Version %q names a major this host does not serve; it serves %s", member, settings.ProtocolVersion).
				WithDetails(map[string]any{"protocolVersions": []string{settings.ProtocolVersion}})
		}
	}
	return nil
}

// majorOf is the major of a version: what precedes its first dot.
func majorOf(v string) string {
	major, _, _ := strings.Cut(v, ".")
	return major
}

// versionRefusal is VersionRefusal over an API Gateway header map.
func versionRefusal(h map[string]string) *apierr.Error {
	return VersionRefusal(header.Values(h, HeaderVersion))
}
