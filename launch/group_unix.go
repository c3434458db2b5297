//go:build unix

package launch

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

// setGroup puts the process in a group of its own, so that stopping it
// reaches the workers a server forks (vLLM's engine cores, tokenizer
// pools) and a Ctrl-C meant for infermatrix does not hit it first.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	parentDeath(cmd.SysProcAttr)
}

func signalNamed(name string) (syscall.Signal, error) {
	switch name {
	case "SIGTERM", "":
		return syscall.SIGTERM, nil
	case "SIGINT":
		return syscall.SIGINT, nil
	}
	return 0, fmt.Errorf("unknown stop signal %q", name)
}

func signalGroup(cmd *exec.Cmd, name string) error {
	sig, err := signalNamed(name)
	if err != nil {
		return err
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func killGroup(cmd *exec.Cmd) error {
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// signalledBy reports whether the process died of the named signal.
func signalledBy(err error, name string) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	sig, serr := signalNamed(name)
	return ok && serr == nil && ws.Signaled() && ws.Signal() == sig
}
