// Package buildinfo says which build of infermatrix produced a run, so that
// a decision record can be traced to the exact tool that measured it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version, Commit and Date are set at link time by the Makefile (make build,
// make release), Version from `git describe --tags`, so that a release tag
// is what `infermatrix version` and every run's manifest name:
//
//	-ldflags "-X github.com/infermatrix/infermatrix/internal/buildinfo.Version=v0.1.0
//	          -X github.com/infermatrix/infermatrix/internal/buildinfo.Commit=abc123
//	          -X github.com/infermatrix/infermatrix/internal/buildinfo.Date=2026-11-27T19:00:00Z"
//
// They must stay plain, uninitialized string variables: -X silently does
// nothing to a variable initialized by a function call. A plain `go build`
// or `go install` leaves them empty and Get falls back to what the Go
// toolchain recorded (the module version for `go install ...@v1.2.3`, the
// VCS revision for a build in a checkout). Date is the commit's date, not
// the build's, so that two builds of one commit are byte-identical.
var (
	Version string
	Commit  string
	Date    string
)

// Info identifies the running build.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Date    string `json:"date,omitempty"`
	Go      string `json:"go"`
}

// Get returns the build's identity.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Date: Date, Go: runtime.Version()}
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
