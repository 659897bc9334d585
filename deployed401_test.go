package idemkit_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocsSayTheDeployed401IsAPIGateways (RED_TEAM 448): behind the
// deployed HTTP API a missing, malformed or unknown key is refused by the
// Lambda authorizer before the api function runs, and API Gateway answers
// its own 401 {"message":"Unauthorized"}, no error envelope, which an
// HTTP API cannot rewrite; idemkit dev answers the envelope. The run
// API's description in functions/README.md and the threat model say so,
// rather than a `401 unauthenticated` envelope everywhere.
func TestDocsSayTheDeployed401IsAPIGateways(t *testing.T) {
	for _, f := range []string{"functions/README.md", "docs/SECURITY.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Join(strings.Fields(string(b)), " ")
		if !strings.Contains(s, "`401 {\"message\":\"Unauthorized\"}`") || !strings.Contains(s, "idemkit dev") {
			t.Errorf("%s does not say the deployed stack's 401 for a missing or unknown key is API Gateway's own {\"message\":\"Unauthorized\"}", f)
		}
		if strings.Contains(s, "missing or unknown → `401 unauthenticated`.") {
			t.Errorf("%s says every missing or unknown key is answered the 401 unauthenticated envelope", f)
		}
	}
}
