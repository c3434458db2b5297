package cheapsse

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Serve is the body of a server process a benchmark starts: it serves on
// loopback, prints the base URL as its first line, and stops when its
// standard input closes. It returns the process's exit code.
func Serve() int {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(s.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = s.Close()
	return 0
}

// StartProcess starts cmd, a server process that prints its base URL as
// its first line and stops when its standard input closes (Serve, or any
// server written the same way), and returns the URL and a stop function
// that closes its input and waits for it; stop may be called more than
// once.
func StartProcess(cmd *exec.Cmd) (url string, stop func() error, err error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("server process: %w", err)
	}
	var once sync.Once
	var waitErr error
	stop = func() error {
		once.Do(func() {
			stdin.Close()
			waitErr = cmd.Wait()
		})
		return waitErr
	}
	return strings.TrimSpace(line), stop, nil
}
