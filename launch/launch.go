// Package launch owns the lifecycle of a server process a run starts for
// one server variant: start it in its own process group with its output in
// a log file, wait until it answers, and stop it (a signal, then SIGKILL
// after a grace period) so that neither it nor its children outlive the
// variant.
//
// It knows nothing of experiments or rows: the runner says what to start
// and decides what a server that never gets ready means for its rows.
package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
)

// Spec is what to start and how to tell it is ready and stop it.
type Spec struct {
	// Command is the program and its arguments, run without a shell.
	Command []string
	// Env is added to this process's environment (KEY=VALUE, expanded).
	Env []string
	// Dir is the working directory; empty: this process's.
	Dir string
	// Log is the file the process's stdout and stderr go to.
	Log string
	// ReadyURL is polled with GET until it answers 200, for at most
	// ReadyTimeout; Header is sent with each poll (a server that checks
	// its API key checks it on /models too).
	ReadyURL     string
	ReadyTimeout time.Duration
	Header       http.Header
	// StopSignal is sent to the process group first (SIGTERM, SIGINT);
	// after StopGrace the group is killed.
	StopSignal string
	StopGrace  time.Duration
}

// Errors a launch ends with, for callers to tell apart.
var (
	// ErrExited: the process exited before it was ready.
	ErrExited = errors.New("server process exited before it was ready")
	// ErrNotReady: the process ran but never answered in time.
	ErrNotReady = errors.New("server never got ready")
)

// Process is a started server.
type Process struct {
	spec    Spec
	cmd     *exec.Cmd
	log     *os.File
	Started time.Time
	// Ready is when the ready URL first answered 200; zero before.
	Ready time.Time

	done    chan struct{} // closed when the process has exited
	waitErr error         // its exit status, once done is closed
	stopped sync.Once
}

// Start starts the process in its own process group, its output appended
// to spec.Log.
func Start(spec Spec) (*Process, error) {
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return nil, errors.New("launch: no command")
	}
	log, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("launch: server log: %w", err)
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Stdin = nil
	setGroup(cmd)
	p := &Process{spec: spec, cmd: cmd, log: log, done: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("launch %s: %w", spec.Command[0], err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process's id (and its process group's).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// WaitReady polls the ready URL, backing off from 100ms to 2s, until it
// answers 200 (nil), the process exits (ErrExited, with its status and the
// end of its log), ReadyTimeout passes (ErrNotReady, with the last answer)
// or ctx ends.
func (p *Process) WaitReady(ctx context.Context, hc *http.Client) error {
	deadline := time.NewTimer(p.spec.ReadyTimeout)
	defer deadline.Stop()
	wait := 100 * time.Millisecond
	last := "no answer yet"
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%w (%v)%s", ErrExited, p.waitErr, p.logTail())
		default:
		}
		if msg, ok := p.poll(ctx, hc); ok {
			p.Ready = time.Now()
			return nil
		} else {
			last = msg
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("%w (%v)%s", ErrExited, p.waitErr, p.logTail())
		case <-deadline.C:
			return fmt.Errorf("%w within %s: GET %s: %s%s", ErrNotReady, p.spec.ReadyTimeout, redact.URL(p.spec.ReadyURL), last, p.logTail())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// poll sends one GET of the ready URL.
func (p *Process) poll(ctx context.Context, hc *http.Client) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.spec.ReadyURL, nil)
	if err != nil {
		return err.Error(), false
	}
	for k, v := range p.spec.Header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err.Error(), false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.Status, false
	}
	return "", true
}

// Stop ends the process and its children: the stop signal to the process
// group, then SIGKILL to the group if it has not exited after the grace
// period. It returns how the process exited: a server that dies of the
// signal asked for stopped as asked, and says so with a nil error.
func (p *Process) Stop() error {
	var err error
	p.stopped.Do(func() {
		defer p.log.Close()
		select {
		case <-p.done:
			err = p.exitError()
			return
		default:
		}
		if serr := signalGroup(p.cmd, p.spec.StopSignal); serr != nil {
			err = fmt.Errorf("stop server: %w", serr)
		}
		select {
		case <-p.done:
			err = errors.Join(err, p.exitError())
		case <-time.After(p.spec.StopGrace):
			_ = killGroup(p.cmd)
			<-p.done
			err = errors.Join(err, fmt.Errorf("server did not exit within %s of %s and was killed", p.spec.StopGrace, p.spec.StopSignal))
		}
		// Children that ignored the signal go with the group.
		_ = killGroup(p.cmd)
	})
	return err
}

// exitError is the process's exit, nil when it ended of the stop signal or
// with status 0.
func (p *Process) exitError() error {
	if p.waitErr == nil || signalledBy(p.waitErr, p.spec.StopSignal) {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) && ee.ExitCode() == 130 && p.spec.StopSignal == "SIGINT" {
		return nil
	}
	return fmt.Errorf("server exited: %w", p.waitErr)
}

// Exited reports whether the process has exited (it may die mid-variant).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// logTail is the last lines of the log, for an error that says why.
func (p *Process) logTail() string {
	f, err := os.Open(p.spec.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(io.LimitReader(f, 1<<24))
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 5 {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "; the log ends: " + strings.Join(lines, " | ")
}

// Env expands a launch block's env: each value's ${NAME} references are
// read from this process's environment. secrets are the values read from
// variables named like credentials (redact.SecretName), to be scrubbed
// from everything the run keeps.
func Env(env map[string]string) (kv []string, secrets []string) {
	for k, v := range env {
		x := os.Expand(v, func(name string) string {
			val := os.Getenv(name)
			if redact.SecretName(name) || redact.SecretName(k) {
				secrets = append(secrets, val)
			}
			return val
		})
		kv = append(kv, k+"="+x)
	}
	return kv, secrets
}

// envRef is a ${NAME} reference in a command-line argument.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Args expands the ${NAME} references in a command line from this
// process's environment (no shell runs it, so nothing else would), so a
// key can be passed as --api-key ${VLLM_API_KEY} without being written in
// the file. secrets are the values read from variables named like
// credentials or given as a credential flag's value, to be scrubbed.
func Args(argv []string) (out []string, secrets []string) {
	out = make([]string, len(argv))
	for i, a := range argv {
		credential := false
		if i > 0 {
			_, credential = redact.CredentialFlag(argv[i-1])
			credential = credential && !strings.Contains(argv[i-1], "=")
		}
		if _, ok := redact.CredentialFlag(a); ok && strings.Contains(a, "=") {
			credential = true
		}
		out[i] = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			v := os.Getenv(name)
			if credential || redact.SecretName(name) {
				secrets = append(secrets, v)
			}
			return v
		})
	}
	return out, secrets
}
