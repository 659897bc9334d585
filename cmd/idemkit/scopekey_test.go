package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestScopeKeyOfAProfileWithoutScopePartsSaysSo: --scope-key under a
// profile whose records are scoped by no credential part (the OpenWOP
// policy's) says that profile has none and which have, not "scope part
// "worker" (profile openwop has )" with an empty list. Failed before the
// fix: that text.
func TestScopeKeyOfAProfileWithoutScopePartsSaysSo(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"conform", "--api-key", "k", "--scope-key", "worker=a", "http://127.0.0.1:9"}, &out, &errb)
	first := strings.SplitN(errb.String(), "\n", 2)[0]
	const want = `idemkit conform: --scope-key: scope part "worker" (profile openwop has no scope parts: --scope-key is for --profile commerce or erp)`
	if code != 2 || first != want {
		t.Fatalf("exit %d, first line %q; want 2 and %q", code, first, want)
	}
}
