package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// TestConfigurationDocNamesEveryDevFlag: docs/CONFIGURATION.md promises
// every `idemkit dev` flag; its "`idemkit dev`" section names each flag
// `idemkit dev -h` lists, as `--name`.
func TestConfigurationDocNamesEveryDevFlag(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## `idemkit dev`\n")
	if !ok {
		t.Fatal("docs/CONFIGURATION.md has no section \"## `idemkit dev`\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"dev", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("idemkit dev -h: exit %d, stderr %q", code, errb.String())
	}
	flags := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)\b`).FindAllStringSubmatch(out.String(), -1)
	if len(flags) == 0 {
		t.Fatalf("no flags in idemkit dev -h:\n%s", out.String())
	}
	for _, m := range flags {
		if !regexp.MustCompile("`--" + regexp.QuoteMeta(m[1]) + "\\b").MatchString(section) {
			t.Errorf("docs/CONFIGURATION.md's `idemkit dev` section does not name --%s", m[1])
		}
	}
}
