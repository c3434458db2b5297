package main

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
)

// make release links the tag into buildinfo (internal/buildinfo's tests
// check that the Makefile's -X flags reach it); this checks that
// `infermatrix version` then prints the tag, the commit and its date.
func TestVersionPrintsTheLinkedTag(t *testing.T) {
	v, c, d := buildinfo.Version, buildinfo.Commit, buildinfo.Date
	t.Cleanup(func() { buildinfo.Version, buildinfo.Commit, buildinfo.Date = v, c, d })

	buildinfo.Version, buildinfo.Commit, buildinfo.Date = "v9.9.9-test", "0123abc", "2026-11-27T19:00:00Z"
	r := cli(t, context.Background(), "version")
	if want := "infermatrix v9.9.9-test (0123abc, 2026-11-27T19:00:00Z) " + runtime.Version() + "\n"; r.code != exitOK || r.stdout != want {
		t.Errorf("version: exit %d %q, want %q", r.code, r.stdout, want)
	}

	// A build that knows only its version prints no empty parentheses.
	buildinfo.Commit, buildinfo.Date = "", ""
	r = cli(t, context.Background(), "version")
	if !strings.HasPrefix(r.stdout, "infermatrix v9.9.9-test ") || strings.Contains(r.stdout, "()") || strings.Contains(r.stdout, ", )") {
		t.Errorf("version: %q", r.stdout)
	}
}
