package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestAPIKeyHelpNamesEveryScopeAttribute: a key for a policy that scopes
// by credential attributes needs them under their exact names (the
// authorizer context keys); `idemkit apikey create -h` shows each policy's
// names as --attr NAME=… in an example, so a key minted as the help says
// is accepted under that policy.
func TestAPIKeyHelpNamesEveryScopeAttribute(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"apikey", "create", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	_, examples, ok := strings.Cut(out.String(), "\nexamples:\n")
	if !ok {
		t.Fatalf("no examples:\n%s", out.String())
	}
	examples, _, _ = strings.Cut(examples, "\n\n")
	for _, p := range []idem.Policy{commerce.Policy, erp.Policy} {
		if len(p.Scope.Credential) == 0 {
			t.Fatalf("policy %s scopes by no credential attribute", p.Name)
		}
		found := false
		for _, line := range strings.Split(examples, "\n") {
			all := true
			for _, name := range p.Scope.Credential {
				all = all && strings.Contains(line, "--attr "+name+"=")
			}
			found = found || all
		}
		if !found {
			t.Errorf("no example mints a key for the %s policy (--attr %s=…):\n%s", p.Name, strings.Join(p.Scope.Credential, "=… --attr "), examples)
		}
	}
}
