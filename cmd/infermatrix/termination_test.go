package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// A termination message longer than Kubernetes keeps is cut on a rune
// boundary with a mark, and a second write replaces the first.
func TestTerminationLogCutsAndReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "termination-log")
	long := strings.Repeat("é", 3000) // 6000 bytes
	if err := writeTerminationLog(path, long); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if len(b) > terminationLimit || !utf8.Valid(b) || !strings.HasSuffix(string(b), " …\n") {
		t.Fatalf("cut message: %d bytes, valid UTF-8 %v, tail %q", len(b), utf8.Valid(b), b[len(b)-8:])
	}
	if err := writeTerminationLog(path, "shard 1/2 done"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "shard 1/2 done\n" {
		t.Fatalf("second message %q, want it to replace the first", b)
	}
	if err := writeTerminationLog("", "x"); err != nil {
		t.Fatalf("empty path: %v", err)
	}
}
