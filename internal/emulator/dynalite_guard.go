package emulator

import (
	_ "embed"
	"os"
	"path/filepath"
)

// dynaliteHangUpGuard is node/hangup-guard.cjs, preloaded into dynalite's
// node process: dynalite 4.0.0 rethrows the "aborted" error node reports
// when a client hangs up in the middle of a request body, which ends the
// process (a fault test hangs up by design, and a crashed engine fails
// every later test on it). The guard drops that one error, saying so on
// the engine's output with dynaliteHangUpLine, and ends the process on
// any other uncaught exception as node would.
//
//go:embed node/hangup-guard.cjs
var dynaliteHangUpGuard []byte

// dynaliteHangUpLine is what the guard writes for each dropped request.
const dynaliteHangUpLine = "a client hung up in the middle of a request; the request is dropped and dynalite goes on"

// writeDynaliteGuard writes the guard into a new temporary directory and
// returns its path and the function that removes it.
func writeDynaliteGuard() (string, func(), error) {
	dir, err := os.MkdirTemp("", "idemkit-dynalite-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	path := filepath.Join(dir, "hangup-guard.cjs")
	if err := os.WriteFile(path, dynaliteHangUpGuard, 0o644); err != nil {
		cleanup()
		return "", nil, err
	}
	return path, cleanup, nil
}
