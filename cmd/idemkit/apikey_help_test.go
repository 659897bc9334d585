package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/apikeys"
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

// TestAPIKeyBadAttrIsOneLine: a bad --attr is a usage error (exit 2) said
// in one line that names the value given, what is wrong with it and the
// form --attr expects (NAME=VALUE, the name's and the value's rules), then
// the hint naming -h; not the whole usage, not the credential's package
// label. A blank value (white space only, " ") is refused when the key is
// made (before, it was stored), while a key stored with one stays
// readable: the credential's reader still accepts it.
func TestAPIKeyBadAttrIsOneLine(t *testing.T) {
	const form = "want NAME=VALUE: NAME 1..64 of a-z A-Z 0-9 _ starting with a letter, not tenantId; VALUE 1..256 characters without control characters, not blank"
	for _, c := range []struct {
		attrs []string
		names string // the value the line names
		says  string // what is wrong with it
	}{
		{[]string{"worker"}, `--attr "worker"`, "no '='"},
		{[]string{"worker="}, `--attr "worker="`, "the value of worker is empty"},
		{[]string{"=shop"}, `--attr "=shop"`, "the name is empty"},
		{[]string{"tenantId=x"}, `--attr "tenantId=x"`, "tenantId is the tenant, not an attribute"},
		{[]string{"9lives=x"}, `--attr "9lives=x"`, `the name "9lives" is not one`},
		{[]string{"worker=a\tb"}, `--attr "worker=a\tb"`, "the value of worker holds a control character"},
		{[]string{"worker=" + strings.Repeat("v", 257)}, `--attr "worker=vvv`, "the value of worker has 257 characters"},
		{[]string{"worker=a", "worker=b"}, `--attr "worker=b"`, "worker is given twice"},
		{[]string{"ns= "}, `--attr "ns= "`, "the value of ns is blank"},
		{[]string{"worker=\u00a0 \u3000"}, `--attr "worker=\u00a0 \u3000"`, "the value of worker is blank"},
	} {
		args := []string{"apikey", "create", "--tenant", "acme", "--endpoint", "http://127.0.0.1:1"}
		for _, a := range c.attrs {
			args = append(args, "--attr", a)
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 || lines[1] != "run 'idemkit apikey create -h' for help" {
			t.Errorf("--attr %q: exit %d stdout %q stderr %q; want exit 2, one line, then the hint", c.attrs, code, out.String(), errb.String())
			continue
		}
		if l := lines[0]; !strings.HasPrefix(l, "idemkit apikey create: "+c.names) || !strings.Contains(l, c.says) || !strings.HasSuffix(l, form) || strings.Contains(l, "host:") {
			t.Errorf("--attr %q: %q; want it to start %q, say %q and end %q", c.attrs, l, "idemkit apikey create: "+c.names, c.says, form)
		}
	}
	if err := apikeys.ValidAttr("ns", " "); err != nil {
		t.Errorf("a stored key's blank attribute is refused by the reader: %v", err)
	}
}
