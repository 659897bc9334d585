package emulator

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// TestJavaRequirementIsStatedAlike: what DynamoDB Local needs, as idemkit
// starts it, is the Java its embedded launcher is compiled for (class
// file version 55: Java 11; DynamoDB Local 1.11.478 itself is Java 8
// code), and what is verified is Java 17. The missing-java error and every
// page that names a Java version say both, alike: "Java 11 or later" and
// "Java 17 verified", and no other version or form ("Java 11+", "Java 17
// expected").
func TestJavaRequirementIsStatedAlike(t *testing.T) {
	if len(loopbackLauncher) < 8 || binary.BigEndian.Uint32(loopbackLauncher) != 0xCAFEBABE {
		t.Fatal("the embedded launcher is no class file")
	}
	if major := binary.BigEndian.Uint16(loopbackLauncher[6:8]); major != 55 {
		t.Fatalf("the launcher's class file version is %d, Java %d: the stated requirement (Java 11) is stale", major, major-44)
	}
	mention := regexp.MustCompile(`Java \d+\+?`)
	texts := map[string]string{"ErrNoJava": ErrNoJava.Error()}
	for _, rel := range []string{"README.md", "functions/QUICKSTART.md", "docs/engines.md", "docs/TESTING.md", "internal/emulator/doc.go"} {
		b, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), rel))
		if err != nil {
			t.Fatal(err)
		}
		texts[rel] = regexp.MustCompile(`\s+`).ReplaceAllString(regexp.MustCompile(`\n//\s*`).ReplaceAllString(string(b), " "), " ")
	}
	for where, text := range texts {
		ms := mention.FindAllString(text, -1)
		if len(ms) == 0 {
			t.Errorf("%s names no Java version", where)
			continue
		}
		for _, m := range ms {
			if m != "Java 11" && m != "Java 17" {
				t.Errorf("%s names %q: want Java 11 (needed) and Java 17 (verified) only", where, m)
			}
		}
		if !regexp.MustCompile(`Java 11 or later`).MatchString(text) || !regexp.MustCompile(`Java 17 (is )?verified`).MatchString(text) {
			t.Errorf("%s does not say \"Java 11 or later\" and \"Java 17 verified\": %q", where, ms)
		}
	}
}
