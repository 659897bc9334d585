//go:build unix

package proc

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// pausePoll is how often PauseGroup looks at the group's threads while it
// waits for every one of them to stop.
const pausePoll = time.Millisecond

// PauseGroup stops process group pgid (SIGSTOP) and returns once the stop
// has taken effect: on Linux, once every thread of every process in the
// group is in the stopped state, read from /proc. kill(2) returns before a
// multi-threaded process has stopped (one thread takes the signal and then
// stops the others), so a thread already running, or woken by a request
// that just arrived, may still serve it; after PauseGroup no thread of the
// group runs until ResumeGroup. The wait is bounded by ctx only (a hang
// guard, not a timing assumption). Where the stopped state cannot be read
// (no /proc), it returns once the signal is sent.
func PauseGroup(ctx context.Context, pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP to process group %d: %w", pgid, err)
	}
	for {
		stopped, err := groupStopped(pgid)
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("process group %d not stopped: %w", pgid, context.Cause(ctx))
		case <-time.After(pausePoll):
		}
	}
}

// ResumeGroup continues process group pgid (SIGCONT).
func ResumeGroup(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT to process group %d: %w", pgid, err)
	}
	return nil
}
