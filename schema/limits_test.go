package schema

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadSoon runs Load with a deadline: a path that is not a regular file
// must be refused at once, never read until it ends (it may never end).
func loadSoon(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Load(path, Options{})
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Load(%s) still running after 10s; want it refused before reading", path)
		return nil
	}
}

func TestLoadRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	for _, tt := range []struct{ path, kind string }{
		{dir, "a directory"},
		{"/dev/zero", "a character device"},
		{fifo, "a named pipe"},
	} {
		if _, err := os.Stat(tt.path); err != nil {
			t.Logf("skip %s: %v", tt.path, err)
			continue
		}
		err := loadSoon(t, tt.path)
		if !errors.Is(err, ErrNotRegularFile) || !strings.Contains(err.Error(), tt.kind) {
			t.Errorf("Load(%s) = %v; want ErrNotRegularFile naming %s", tt.path, err, tt.kind)
		}
	}
}

func TestLoadRefusesLargeFiles(t *testing.T) {
	// A sparse 57 MB file: refused from its size, before it is read.
	path := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(57_000_000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = loadSoon(t, path)
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Pos != (Pos{1, 1}) ||
		!strings.Contains(ps[0].Message, "57.0 MB, over the 1 MiB limit") {
		t.Fatalf("Load(57 MB file) = %v; want one problem at 1:1 naming its size and the limit", err)
	}
	// Parse, which has no file to stat, applies the same limit.
	data := []byte("# " + strings.Repeat("x", MaxFileBytes) + "\n")
	if _, err := Parse("big.yaml", data, Options{}); !errors.As(err, &ps) || !strings.Contains(ps[0].Message, "over the 1 MiB limit") {
		t.Errorf("Parse(%d bytes) = %v; want the size limit", len(data), err)
	}
}

// limitProblems parses body after the standard header and returns the flat
// text of each problem, failing if the file loads.
func limitProblems(t *testing.T, body string) []string {
	t.Helper()
	_, err := Parse("test.yaml", []byte(header+body), Options{})
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want problems", err)
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = flat(p)
	}
	return out
}

func hasProblem(got []string, want string) bool {
	for _, g := range got {
		if strings.Contains(g, want) {
			return true
		}
	}
	return false
}

// list writes n values start, start+1, ... as a YAML flow list.
func list(start, n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprint(start + i)
	}
	return "[" + strings.Join(vals, ", ") + "]"
}

func TestCountLimits(t *testing.T) {
	const defaults = "defaults: {requests: 1, input_tokens: 8, output_tokens: 4}\n"
	manyRows := func(n int) string {
		var b strings.Builder
		b.WriteString(defaults + "rows:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {id: r%d, concurrency: 1}\n", i)
		}
		return b.String()
	}
	manyRules := func(key, item string, n int) string {
		var b strings.Builder
		b.WriteString(key + ":\n")
		for i := range n {
			fmt.Fprintf(&b, item, i)
		}
		return b.String()
	}
	oneRow := defaults + "rows:\n  - {id: a, concurrency: 1}\n"
	tests := []struct {
		name, body, want string
	}{
		{"rows", manyRows(MaxRows + 1), "rows[1000]: 1001 rows, over the limit of 1000"},
		{"sweep values", defaults + "rows:\n  - {id: s, sweep: {concurrency: " + list(1, MaxSweepValues+1) + "}}\n",
			"rows[0].sweep.concurrency[256]: 257 concurrency values, over the limit of 256"},
		{"sweep product", defaults + "rows:\n  - {id: s, sweep: {concurrency: " + list(1, 40) + ", input_tokens: " + list(10, 30) + "}}\n",
			"rows[0].sweep: the sweep makes 1200 rows, and the experiment has room for 1000 more"},
		{"sweeps together", defaults + "rows:\n  - {id: s, sweep: {concurrency: " + list(1, 200) + ", input_tokens: [8, 9, 10]}}\n" +
			"  - {id: t, sweep: {concurrency: " + list(1, 200) + ", input_tokens: [8, 9, 10]}}\n",
			"rows[1].sweep: the sweep makes 600 rows, and the experiment has room for 400 more"},
		{"acceptance", oneRow + manyRules("acceptance", "  - {name: r%d, expect: ttft.p95 < 1}\n", MaxRules+1),
			"acceptance[256]: 257 acceptance rules, over the limit of 256"},
		{"hypotheses", oneRow + manyRules("hypotheses", "  - {id: H%d, statement: s, expect: rows.a.ttft.p95 > 0}\n", MaxRules+1),
			"hypotheses[256]: 257 hypotheses, over the limit of 256"},
		{"percentiles", oneRow + "report: {percentiles: " + list(1, MaxPercentiles+1) + "}\n",
			"report.percentiles[32]: 33 percentiles, over the limit of 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := limitProblems(t, tt.body)
			if !hasProblem(got, tt.want) {
				t.Errorf("problems:\n  %s\nwant one containing %q", strings.Join(got, "\n  "), tt.want)
			}
		})
	}
	// At the limits, a file loads: 1,000 rows from a 250 × 4 sweep.
	p := mustParse(t, defaults+"rows:\n  - {id: s, sweep: {concurrency: "+list(1, 250)+", input_tokens: [8, 9, 10, 11]}}\n", Options{})
	if len(p.Rows) != MaxRows {
		t.Errorf("a 250 × 4 sweep planned %d rows; want %d", len(p.Rows), MaxRows)
	}
}

func TestLongNameAndSweptIDs(t *testing.T) {
	long := strings.Repeat("n", MaxIDBytes+1)
	_, err := Parse("test.yaml", []byte("apiVersion: infermatrix/v1\nname: "+long+"\nserver: {target: builtin}\n"+
		"defaults: {requests: 1, input_tokens: 8, output_tokens: 4}\nrows:\n  - {id: a, concurrency: 1}\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "test.yaml:2:7: name: the name is 101 bytes long, over the limit of 100") {
		t.Errorf("Parse(101-byte name) = %v; want the id limit at 2:7", err)
	}
	// Only the id the author wrote is checked: a 100-byte id may sweep,
	// though its expanded ids are longer and hold '/'.
	id := strings.Repeat("s", MaxIDBytes)
	p := mustParse(t, "defaults: {requests: 1, input_tokens: 8, output_tokens: 4}\nrows:\n  - {id: "+id+", sweep: {concurrency: [1, 100000]}}\n", Options{})
	if got := p.Rows[1].ID; got != id+"/c=100000" {
		t.Errorf("swept id = %q; want %q", got, id+"/c=100000")
	}
}

func TestAliasBudget(t *testing.T) {
	// Thirty levels would overflow any count that is not capped.
	var b strings.Builder
	b.WriteString(header + "metadata:\n  l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [", i, i)
		for j := range 9 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 4}]\n")
	_, err := Parse("bomb.yaml", []byte(b.String()), Options{})
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Path != "metadata.l5[0]" || ps[0].Pos != (Pos{10, 12}) ||
		!strings.Contains(ps[0].Message, "expands the document beyond 100000 values") {
		t.Fatalf("Parse(bomb) = %v; want one problem at the alias crossing the budget, 10:12 metadata.l5[0]", err)
	}
	// Anchors used as intended, merged into many rows, load.
	var ok strings.Builder
	ok.WriteString(header + "x-chat: &chat {requests: 1, input_tokens: 8, output_tokens: 4, body: {temperature: 0, top_p: 1}}\nrows:\n")
	for i := range 500 {
		fmt.Fprintf(&ok, "  - {id: r%d, concurrency: 1, <<: *chat}\n", i)
	}
	if _, err := Parse("ok.yaml", []byte(ok.String()), Options{}); err != nil {
		t.Errorf("500 rows merging one anchor: %v", err)
	}
}

func TestDocuments(t *testing.T) {
	const one = header + "rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 4}]\n"
	for _, tt := range []struct {
		name, text string
		want       string // "" loads
	}{
		{"one", one, ""},
		{"explicit start and end", "---\n" + one + "...\n", ""},
		{"second document", one + "---\nname: b\n", "5:1: the file holds more than one YAML document"},
		{"empty second document", one + "---\n", "5:1: the file holds more than one YAML document"},
		{"syntax error in the second", one + "---\n[\n", "invalid YAML"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.text), Options{})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Parse = %v; want it to load", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Parse = %v; want %q", err, tt.want)
			}
		})
	}
}

// TestSyntaxErrorsHavePositions checks that every YAML error carries a
// line and column, including those yaml.v3 reports without a line.
func TestSyntaxErrorsHavePositions(t *testing.T) {
	for _, tt := range []struct {
		text string
		want Pos
		msg  string
	}{
		{"a: b: c\n", Pos{1, 1}, "mapping values are not allowed"},
		{"\t- a\n", Pos{1, 1}, "cannot start any token"},
		{"rows:\n  - a\n \t- b\n", Pos{3, 2}, "tab character"},
		{"rows:\n  - a\n  -\tb: 1\n\tc: 2\n", Pos{3, 4}, "cannot start any token"},
		{"a: 1\nb:\n  c: 1\n\t d: 2\n", Pos{4, 1}, "tab character"},
		{"name: x\nrows: [\n", Pos{2, 1}, "did not find expected node content"},
		{"name: x\ndescription: ab\x00c\n", Pos{2, 16}, "control character U+0000"},
		{"name: \"é\"\n\xff\xfe\n", Pos{2, 1}, "byte 0xff is not UTF-8"},
		{"name: ok\ndescription: ééé\xc3\n", Pos{2, 17}, "byte 0xc3 is not UTF-8"},
		{"# *nope\nrows: [*nope]\n", Pos{2, 8}, "unknown anchor 'nope'"},
	} {
		_, err := Parse("t.yaml", []byte(tt.text), Options{})
		var ps Problems
		if !errors.As(err, &ps) || len(ps) != 1 {
			t.Errorf("Parse(%q) = %v; want one problem", tt.text, err)
			continue
		}
		if ps[0].Pos != tt.want || !strings.Contains(ps[0].Message, tt.msg) {
			t.Errorf("Parse(%q) = %s; want %d:%d and %q", tt.text, ps[0].Error(), tt.want.Line, tt.want.Col, tt.msg)
		}
	}
}
