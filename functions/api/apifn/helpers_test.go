package apifn

import (
	"io"
	"log/slog"
)

func discard() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// runExt is a snapshot's extensions["idemkit.run"] (nil when absent).
func runExt(snap map[string]any) map[string]any {
	ext, _ := snap["extensions"].(map[string]any)
	m, _ := ext[ExtensionRun].(map[string]any)
	return m
}
