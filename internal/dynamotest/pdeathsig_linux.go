package dynamotest

import "syscall"

// setPdeathsig makes the kernel SIGKILL the emulator when the OS thread that
// forked it exits. The emulator is started from a goroutine that locks its
// thread and stays blocked in Wait for the emulator's whole life, so the
// thread dies exactly when the test binary dies (including crashes and
// SIGKILL), and no emulator is orphaned.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
