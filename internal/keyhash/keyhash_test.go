package keyhash

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSecretHashesAlikeInEveryProcess: two processes given the same secret
// hash a key identically; with no secret (the per-process salt) they
// differ; the hash never contains the key.
func TestSecretHashesAlikeInEveryProcess(t *testing.T) {
	if os.Getenv("KEYHASH_CHILD") == "1" {
		os.Stdout.WriteString(New(os.Getenv("KEYHASH_SECRET")).Log("key-0123456789abcdef") + "\n")
		os.Exit(0)
	}
	child := func(secret string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSecretHashesAlikeInEveryProcess$")
		cmd.Env = append(os.Environ(), "KEYHASH_CHILD=1", "KEYHASH_SECRET="+secret)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	a, b := child("s3cret"), child("s3cret")
	if a != b || !strings.HasPrefix(a, "kh:") || strings.Contains(a, "0123456789abcdef") {
		t.Fatalf("same secret: %q and %q", a, b)
	}
	if c := child("other"); c == a {
		t.Fatalf("another secret hashed alike: %q", c)
	}
	if x, y := child(""), child(""); x == y {
		t.Fatalf("no secret: two processes hashed alike (%q): the salt must be per process", x)
	}
	if New("").Log("k") != Log("k") || New("s3cret").Log("k") == Log("k") {
		t.Fatal("New(\"\") must be the per-process salt, New(secret) not")
	}
}
