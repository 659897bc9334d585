// Package archtest holds the architecture rules of the repository as tests:
// protocol logic (idem, ledger and their memory stores and suites) never
// depends on the AWS SDK, so only the dynamostore packages, the functions and
// the CLI do.
package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

var protocolPackages = []string{
	"./idem", "./idem/memstore", "./idem/idemtest",
	"./ledger", "./ledger/memstore", "./ledger/ledgertest",
	"./ledger/fence", "./ledger/fence/memstore", "./ledger/fence/fencetest",
	"./internal/jcs", "./emf",
}

func TestProtocolPackagesDoNotImportTheAWSSDK(t *testing.T) {
	for _, p := range protocolPackages {
		cmd := exec.Command("go", "list", "-deps", p)
		cmd.Dir = shared.ModuleRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/aws/aws-sdk-go-v2") || strings.HasPrefix(dep, "github.com/aws/smithy-go") {
				t.Errorf("%s depends on %s: protocol logic must not import the AWS SDK", p, dep)
			}
		}
	}
}
