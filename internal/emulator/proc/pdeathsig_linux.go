package proc

import "syscall"

// setPdeathsig makes the kernel SIGKILL the child when the OS thread that
// forked it exits. Start forks from a goroutine that locks its thread and
// stays blocked in Wait for the child's whole life, so the thread dies
// exactly when the parent process dies (including crashes and SIGKILL), and
// no child is orphaned.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
