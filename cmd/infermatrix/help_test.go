package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestHelpExamplesNameRealFiles: an example that names an experiment the
// repository does not have is the first command a new user copies, and it
// fails.
func TestHelpExamplesNameRealFiles(t *testing.T) {
	file := regexp.MustCompile(`experiments/[\w./-]+\.ya?ml`)
	for _, c := range []string{"", "run", "validate", "plan", "report", "sim", "k8s", "merge"} {
		args := []string{"--help"}
		if c != "" {
			args = []string{c, "--help"}
		}
		r := cli(t, context.Background(), args...)
		for _, name := range file.FindAllString(r.stdout, -1) {
			if name == "experiments/*.yaml" {
				continue
			}
			if _, err := os.Stat(filepath.Join("..", "..", name)); err != nil {
				t.Errorf("%s --help names %s: %v", c, name, err)
			}
		}
	}
}
