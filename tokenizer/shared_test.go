package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedRel is where the project's shared/ directory, which holds real
// tokenizer files too large to keep in the repository, sits relative to this
// package's directory.
var sharedRel = filepath.Join("..", "..", "shared", "tokenizers")

// sharedDir returns the shared tokenizers directory, skipping the test when
// it is absent, or failing it when INFERMATRIX_REQUIRE_SHARED=1 (CI sets it
// where shared/ must be present, so that a missing directory cannot turn the
// real-tokenizer tests into silent skips).
func sharedDir(tb testing.TB) string {
	tb.Helper()
	if fi, err := os.Stat(sharedRel); err == nil && fi.IsDir() {
		return sharedRel
	}
	msg := "shared tokenizer files not found at " + sharedRel + " (the project's shared/ directory beside the repository)"
	if os.Getenv("INFERMATRIX_REQUIRE_SHARED") == "1" {
		tb.Fatal(msg + "; INFERMATRIX_REQUIRE_SHARED=1 requires them")
	}
	tb.Skip(msg + "; skipping")
	return ""
}
