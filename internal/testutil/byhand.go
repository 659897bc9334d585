package testutil

import (
	"flag"
	"os"
	"strings"
)

// DeselectByHand deselects the by-hand test named name (a recipe the
// README has users run against `idemkit dev`) when no DYNAMODB_ENDPOINT is
// given, where it would only skip: in the repository the same function runs
// on every test emulator through its ...OnEmulators wrapper. Call it from
// TestMain, before the tests run; it parses the flags and adds to any
// -skip pattern already given (make test passes one).
func DeselectByHand(name string) {
	flag.Parse()
	if os.Getenv("DYNAMODB_ENDPOINT") != "" {
		return
	}
	pat := "^" + name + "$"
	switch prev := flag.Lookup("test.skip").Value.String(); {
	case prev == "":
		_ = flag.Set("test.skip", pat)
	case !strings.Contains(prev, "/"):
		_ = flag.Set("test.skip", prev+"|"+pat)
	}
}
