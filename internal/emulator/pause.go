//go:build unix

package emulator

import (
	"context"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// Pause stops the emulator's process group (SIGSTOP) and returns once the
// stop has taken effect (every thread stopped, see proc.PauseGroup), so a
// request sent after Pause returns meets a stalled engine, never one that
// still answers; bounded by ctx. The serializing proxy, if any, keeps
// running and forwards to the stopped engine.
func (s *Server) Pause(ctx context.Context) error { return proc.PauseGroup(ctx, s.PID()) }

// Resume continues the emulator's process group (SIGCONT).
func (s *Server) Resume() error { return proc.ResumeGroup(s.PID()) }
