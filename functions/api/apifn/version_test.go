package apifn

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
)

// TestVersionRefusalGrammar: OpenWOP-Version selects by major, so every
// well-formed MAJOR or MAJOR.MINOR naming major 2 is served whatever its
// minor (versioning.md §1.3: `2` and `2.0` alike, the minor informational),
// the optional whitespace around a value or a list member is not part of
// it; a member that is not MAJOR or MAJOR.MINOR names no version and is
// refused 406 protocol_version_unsupported with details.protocolVersions,
// like an unlisted major — never read as major 2 by what precedes its dot.
func TestVersionRefusalGrammar(t *testing.T) {
	for _, v := range []string{"2", "2.0", "2.21", "2.99", " 2 ", "\t2.21", "2, 2.0", settings.ProtocolVersion} {
		if e := VersionRefusal([]string{v}); e != nil {
			t.Errorf("OpenWOP-Version %q refused: %v", v, e)
		}
	}
	for _, v := range []string{"2.x", "2.21.0", "2.", ".2", "02", "2.01", "v2", "2 .0", "2.0-rc.1", "+2", "２", "2, 2.x", "x"} {
		e := VersionRefusal([]string{v})
		if e == nil {
			t.Errorf("OpenWOP-Version %q served as major 2", v)
			continue
		}
		pv, _ := e.Details["protocolVersions"].([]string)
		if e.Status != 406 || e.Code != CodeProtocolVersionUnsupported || len(pv) != 1 || pv[0] != settings.ProtocolVersion {
			t.Errorf("OpenWOP-Version %q: %v %v", v, e, e.Details)
		}
	}
}
