package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// printOnce writes line, a key or secret shown once and nowhere else, to
// stdout and returns the write's error: stdout closed, a full disk
// (`> key.txt`), a pipe whose reader is gone (`| true`). While it writes, a
// SIGPIPE is taken as that error, not as the end of the process, which
// would die of it without a word: the command then says what it stored and
// how to undo it, exit 1 (RED_TEAM 413).
func printOnce(stdout io.Writer, line string) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGPIPE)
	defer signal.Stop(sig)
	_, err := fmt.Fprintln(stdout, line)
	return err
}
