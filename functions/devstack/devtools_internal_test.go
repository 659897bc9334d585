package devstack

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/emulator"
)

// TestToolsVariableNamingNoToolsDirectoryIsSaid: $IDEMKIT_TOOLS naming a
// directory that is not laid out as the clone's tools/ (no
// package-lock.json: a typo, the clone's root) stops dev with a line
// naming the variable and what it must name, before npm is run there
// (RED_TEAM 497: `npm ci --prefix DIR` ran in the directory named, and its
// usage error was all dev said).
func TestToolsVariableNamingNoToolsDirectoryIsSaid(t *testing.T) {
	dir := t.TempDir()
	getenv := func(k string) string {
		if k == "IDEMKIT_TOOLS" {
			return dir
		}
		return ""
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, engine := range []string{emulator.DynamoDBLocal, emulator.Dynalite} {
		_, err := startEngine(context.Background(), Options{Engine: engine, Getenv: getenv}, logger)
		if err == nil || !strings.Contains(err.Error(), "IDEMKIT_TOOLS="+dir) || !strings.Contains(err.Error(), "package-lock.json") || strings.Contains(err.Error(), "npm error") {
			t.Errorf("%s: got %v", engine, err)
		}
		_, _, err = StartEngine(context.Background(), Options{Engine: engine, Getenv: getenv})
		if err == nil || !strings.Contains(err.Error(), "IDEMKIT_TOOLS="+dir) {
			t.Errorf("StartEngine %s: got %v", engine, err)
		}
	}
}
