// Package buildinfo says which build of infermatrix produced a run, so that
// a decision record can be traced to the exact tool that measured it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version and Commit are set at link time by the Makefile:
//
//	-ldflags "-X github.com/infermatrix/infermatrix/internal/buildinfo.Version=v0.1.0
//	          -X github.com/infermatrix/infermatrix/internal/buildinfo.Commit=abc123"
//
// A plain `go build` leaves them empty and Get falls back to what the Go
// toolchain recorded.
var (
	Version string
	Commit  string
)

// Info identifies the running build.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go"`
}

// Get returns the build's identity.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Commit == "" {
				i.Commit = s.Value
			}
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	return i
}
