package schema

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wants reads the "# want: ..." lines of a test file: each is the text of
// one expected problem after the file name, with "\n    hint: " written
// as " | hint: ". A want may be a prefix of the full text.
func wants(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if w, ok := strings.CutPrefix(line, "# want: "); ok {
			out = append(out, w)
		}
	}
	return out
}

func flat(p Problem) string {
	s := strings.TrimPrefix(p.Error(), p.File+":")
	return strings.ReplaceAll(s, "\n    hint: ", " | hint: ")
}

// TestInvalidFiles checks every file in testdata/invalid against the
// problems it lists: all of them, in order, and no others.
func TestInvalidFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 10 {
		t.Fatalf("found %d invalid examples; want the whole set", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := wants(t, f)
			if len(want) == 0 {
				t.Fatalf("%s has no # want: lines", f)
			}
			_, err := Load(f, Options{})
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Load(%s) = %v; want Problems", f, err)
			}
			got := make([]string, len(ps))
			for i, p := range ps {
				got[i] = flat(p)
				if p.File != f {
					t.Errorf("problem %d names file %q; want %q", i, p.File, f)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("got %d problems; want %d:\n got: %s\nwant: %s", len(got), len(want),
					strings.Join(got, "\n      "), strings.Join(want, "\n      "))
			}
			for i := range want {
				if !strings.HasPrefix(got[i], want[i]) {
					t.Errorf("problem %d:\n got: %s\nwant: %s", i, got[i], want[i])
				}
			}
		})
	}
}

// TestValidFiles loads every example experiment and the valid fixtures.
func TestValidFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	examples, _ := filepath.Glob("../experiments/*.yaml")
	files = append(files, examples...)
	if len(examples) == 0 {
		t.Fatal("no experiments/*.yaml found")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			p, err := Load(f, Options{})
			if err != nil {
				t.Fatalf("Load(%s):\n%v", f, err)
			}
			if len(p.Rows) == 0 {
				t.Errorf("Load(%s) planned no rows", f)
			}
			if len(p.SHA256) != 64 {
				t.Errorf("SHA256 = %q", p.SHA256)
			}
		})
	}
}
