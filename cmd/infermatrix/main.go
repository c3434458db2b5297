// Command infermatrix benchmarks LLM inference servers from declarative
// experiment files and writes decision records.
//
// This package holds only the command line: flags, signals and exit codes.
// The work is done by schema (experiment files), runner (load and
// measurement), reports (verdicts and records) and sim (the built-in
// server).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/infermatrix/infermatrix/internal/textsafe"
)

// Exit codes, documented in README.md. They are distinct so that CI can
// tell a rejected configuration from a broken run.
const (
	exitOK         = 0 // every judged row passed acceptance
	exitRuntime    = 1 // the tool or the server failed: no trustworthy verdict
	exitUsage      = 2 // bad command line
	exitAcceptance = 3 // the run completed and at least one row failed acceptance
	exitInvalid    = 4 // the experiment file is invalid; nothing was sent
	// exitInconclusive: nothing failed, but a row with rules has no
	// trustworthy verdict (invalid, not run, or left out with --rows).
	exitInconclusive = 5
	exitInterrupted  = 130 // interrupted (Ctrl-C); records so far are on disk
)

// exitError carries an exit code through cobra's error return.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

func main() {
	// Only a run has requests in flight to finish; other commands just
	// stop.
	first := "\ninterrupted: stopping (Ctrl-C again to exit now)"
	if len(os.Args) > 1 && os.Args[1] == "run" {
		first = "\ninterrupted: finishing up; requests in flight get their grace period (Ctrl-C again to exit now)"
	}
	ctx, stop := interruptContext(first)
	stopProfile := startProfile(os.Stderr)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(code)
}

// interruptContext is cancelled by the first SIGINT or SIGTERM, which lets
// a run stop dispatching, give requests in flight their grace period and
// write every record. A second signal exits at once: the records already
// written stay intact, because each was written whole when its request
// ended.
func interruptContext(first string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, first)
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "exiting now; records written so far are on disk")
		os.Exit(exitInterrupted)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

// Main runs the command line and returns the exit code. It is main without
// the process: tests call it directly.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(ctx, args, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		// An error can quote the server (a model id, a response body)
		// or the experiment file: it is printed without controls.
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, textsafe.Terminal(ee.err.Error()))
		}
		return ee.code
	}
	// Errors cobra raises itself: unknown commands and flags, wrong
	// argument counts.
	fmt.Fprintf(stderr, "%s\nRun 'infermatrix --help' for usage.\n", textsafe.Terminal(err.Error()))
	return exitUsage
}
