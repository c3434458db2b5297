package schema

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// FuzzLoad feeds arbitrary bytes to the loader, as a hostile or broken
// experiment file would: decoding, defaults, sweeps, file checks and
// expression compilation all run. Whatever the input, Parse must return
// promptly with either a plan or problems that each say where and what, and
// its memory must stay in proportion to the input (an alias bomb must not
// expand). Run it with make fuzz.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../experiments/*.yaml", "testdata/valid/*.yaml", "testdata/invalid/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("a: &a [x,x]\nb: &b [*a,*a]\nc: [*b,*b]\n"))
	f.Add([]byte("x: &a {<<: *a}\n"))
	f.Add([]byte("---\n...\n---\n"))
	// Relative paths in the input resolve under testdata, never elsewhere.
	path := filepath.Join("testdata", "fuzz.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		plan, err := Parse(path, data, Options{})
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)

		if elapsed > 5*time.Second {
			t.Errorf("Parse took %s on %d bytes", elapsed, len(data))
		}
		// Decoding costs about 100 bytes per byte of YAML; expanding
		// aliases is bounded by MaxAliasNodes.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20+uint64(len(data))*1000 {
			t.Errorf("Parse allocated %d MB on %d bytes", alloc>>20, len(data))
		}
		if err == nil {
			if plan == nil || len(plan.Rows) == 0 || len(plan.Rows) > MaxRows {
				t.Fatalf("Parse returned no error and a plan with %d rows", len(plan.Rows))
			}
			return
		}
		var ps Problems
		if !errors.As(err, &ps) {
			t.Fatalf("Parse returned %T %v; want Problems", err, err)
		}
		if plan != nil {
			t.Errorf("Parse returned a plan and problems")
		}
		if len(ps) == 0 {
			t.Fatalf("Parse returned empty Problems")
		}
		for _, p := range ps {
			if p.Pos.Line < 1 || p.Pos.Col < 1 || p.Message == "" || p.File != path {
				t.Errorf("problem without a position, message or file: %+v", p)
			}
		}
	})
}
