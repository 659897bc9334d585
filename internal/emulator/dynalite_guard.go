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
	dir, cleanup, err := writeTempFile("idemkit-dynalite-", "hangup-guard.cjs", dynaliteHangUpGuard)
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, "hangup-guard.cjs"), cleanup, nil
}

// writeTempFile writes data as the file name of a new temporary directory
// (os.MkdirTemp's pattern) and returns the directory and the function that
// removes it; on error nothing is left behind.
func writeTempFile(pattern, name string, data []byte) (string, func(), error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}
