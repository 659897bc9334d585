//go:build unix && !linux

package proc

import "syscall"

// setPdeathsig is a no-op outside Linux: a crashed parent may leave its
// children running there (Stop still ends them on a normal exit).
func setPdeathsig(*syscall.SysProcAttr) {}
