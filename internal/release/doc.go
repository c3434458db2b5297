// Package release holds the checks on what a release ships besides the
// binary's code: the Dockerfile's invariants (release_test.go). The
// artifacts themselves are built by `make release` and `make image`
// (docs/release.md); nothing here builds them, so that go test needs
// neither a container tool nor minutes of cross-compiling.
package release
