package memstore_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestBuildsOn32BitPlatforms: the memory store compiles where int is 32
// bits (386, arm), as the rest of the protocol packages do: its record
// limit is the smaller of its 32-bit offsets and the platform's int.
func TestBuildsOn32BitPlatforms(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("cross-compiles the package (runs without -short, and always under CI=true)")
	}
	for _, arch := range []string{"386", "arm"} {
		cmd := exec.Command("go", "vet", ".")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("GOARCH=%s: %v\n%s", arch, err, out)
		}
	}
}
