//go:build unix && !linux

package dynamotest

import "syscall"

// setPdeathsig is a no-op outside Linux: a crashed test binary may leave its
// emulators running there (Main still stops them on a normal exit).
func setPdeathsig(*syscall.SysProcAttr) {}
