//go:build unix && !linux

package launch

import "syscall"

// parentDeath has no equivalent here: a server outlives an infermatrix
// that dies without stopping it.
func parentDeath(*syscall.SysProcAttr) {}
