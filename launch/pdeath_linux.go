package launch

import "syscall"

// parentDeath has the kernel kill the server if infermatrix dies without
// stopping it (a second Ctrl-C, a crash): a server left running would
// hold its port and its GPUs for the next run. The kernel sends it when
// the thread that started the server exits; Go keeps its threads unless a
// goroutine locked to one ends, which this package never does.
func parentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
