package apikeys

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDeployingSaysWhichSigningSecretsAreKept: docs/DEPLOYING.md's table of
// what is kept says what a tenant's signing-secret item holds as
// RotateSigningSecret writes it: the current secret and up to
// MaxPreviousSecrets replaced ones, each signing until its own grace ends
// (RED_TEAM 394: the row said "the one it replaced", as before a rotation
// within a grace kept the earlier secrets too).
func TestDeployingSaysWhichSigningSecretsAreKept(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dynamotest.RepoRoot(), "docs", "DEPLOYING.md"))
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `ApiKeysTable` |") && strings.Contains(l, SigningItemPrefix+"TENANT") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("docs/DEPLOYING.md's table of what is kept has no ApiKeysTable row for the signing secrets (whsec#TENANT)")
	}
	for _, want := range []string{fmt.Sprintf("at most %d", MaxPreviousSecrets), "each signing until its own grace ends"} {
		if !strings.Contains(row, want) {
			t.Errorf("docs/DEPLOYING.md's signing-secret row does not say %q:\n%s", want, row)
		}
	}
}
