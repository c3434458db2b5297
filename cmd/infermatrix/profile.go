package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// Environment variables that profile the tool itself. They are for
// whoever asks why infermatrix is slow on their machine (and for the
// project's own benchmarks, which run the CLI as a child process), not a
// part of any run's record, so they are variables rather than flags on
// every command.
const (
	cpuProfileEnv  = "INFERMATRIX_CPUPROFILE" // a CPU profile of the whole command, for go tool pprof
	heapProfileEnv = "INFERMATRIX_MEMPROFILE" // the heap as the command ends
	traceEnv       = "INFERMATRIX_TRACE"      // an execution trace, for go tool trace
)

// startProfile starts whatever the environment asks for and returns the
// function that finishes it; a profile that cannot be started is said on
// stderr and skipped: it must never cost the run.
func startProfile(stderr io.Writer) (stop func()) {
	var stops []func()
	open := func(env string) *os.File {
		path := os.Getenv(env)
		if path == "" {
			return nil
		}
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", env, err)
			return nil
		}
		return f
	}
	if f := open(cpuProfileEnv); f != nil {
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cpuProfileEnv, err)
			f.Close()
		} else {
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		}
	}
	if f := open(traceEnv); f != nil {
		if err := trace.Start(f); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", traceEnv, err)
			f.Close()
		} else {
			stops = append(stops, func() { trace.Stop(); f.Close() })
		}
	}
	if path := os.Getenv(heapProfileEnv); path != "" {
		stops = append(stops, func() {
			f := open(heapProfileEnv)
			if f == nil {
				return
			}
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", heapProfileEnv, err)
			}
			f.Close()
		})
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
