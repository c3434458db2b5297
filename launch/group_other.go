//go:build !unix

package launch

import (
	"os/exec"
)

// Without process groups the process alone is signalled: killed, since
// there is no SIGTERM to send.
func setGroup(cmd *exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, name string) error { return cmd.Process.Kill() }

func killGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

func signalledBy(err error, name string) bool { return false }
