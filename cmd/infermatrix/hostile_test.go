package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The hostile corpus: experiment files, dataset and trace files and command
// lines that a checked-in file, a dataset from elsewhere or a careless
// command line can hold. Every one must be refused by `validate` and by
// `run` alike: exit 4 (2 for a bad flag), a position in the file, no request
// sent, no run directory left, no secret echoed, no escape sequence printed,
// and no hang or unbounded memory on the way.

// hostileSecret is a credential some cases carry: it must appear in no
// output.
const hostileSecret = "hunter2-SEKRIT"

// hostileHead is a valid experiment up to its rows, against a server that
// is never reached (nothing may be sent).
const hostileHead = `apiVersion: infermatrix/v1
name: hostile
server: {urls: ["http://127.0.0.1:9/v1"], model: m}
`

type hostileCase struct {
	name  string
	yaml  string            // the experiment; DIR is replaced by the case's directory
	files map[string]string // other files in the case's directory
	args  []string          // extra flags for run and validate's command line
	// path, when set, is the experiment to read instead of the case's
	// file (a device); fifo names a named pipe made in the directory.
	path, fifo string
	// where is a regexp the output must hold: the position of the problem.
	where string
	// says is a regexp the output must hold: what is wrong.
	says string
	code int // the exit code; 0 means exitInvalid
	// maxAlloc bounds the bytes allocated while the case runs; 0 is 256 MiB.
	maxAlloc uint64
}

func hostileCases() []hostileCase {
	row := func(extra string) string {
		return hostileHead + "rows:\n  - id: r\n    requests: 2\n    concurrency: 1\n    input_tokens: 16\n    output_tokens: 4\n" + extra
	}
	// A row whose prompts come from a dataset, and one replaying a trace.
	dataset := func(file, format string) string {
		return hostileHead + "rows:\n  - id: r\n    requests: 2\n    concurrency: 1\n    output_tokens: 4\n    dataset: {file: " + file + ", format: " + format + "}\n"
	}
	trace := hostileHead + "rows:\n  - id: r\n    trace: {file: t.jsonl}\n"
	// Nine levels of nine aliases each: 9^9 nodes once expanded.
	var bomb strings.Builder
	bomb.WriteString(hostileHead + "metadata:\n  l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&bomb, "  l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	bomb.WriteString("rows:\n  - {id: r, requests: 1, input_tokens: 8, output_tokens: 2}\n")

	sweep := make([]string, 10000)
	for i := range sweep {
		sweep[i] = fmt.Sprint(i + 1)
	}
	return []hostileCase{
		{name: "alias bomb", says: `alias`, yaml: bomb.String(), where: `\.yaml:\d+:\d+`, maxAlloc: 128 << 20},
		{name: "second document", says: `document`, yaml: row("") + "---\nname: other\n", where: `\.yaml:\d+:\d+`},
		{name: "merge key not a map", says: `merge|<<`, yaml: row("    <<: 5\n"), where: `\.yaml:\d+:\d+`},
		{name: "binary file", yaml: "\x00\x01\x02\xff\xfe binary \x00", where: `\.yaml:\d+:\d+`},
		{name: "invalid UTF-8", yaml: hostileHead + "description: \"caf\xe9\"\nrows: []\n", where: `\.yaml:\d+:\d+`},
		{name: "long row id", says: `long|bytes|characters`, yaml: strings.Replace(row(""), "id: r", "id: "+strings.Repeat("r", 300), 1), where: `\.yaml:\d+:\d+`},
		{name: "row id is a path", says: `id`, yaml: strings.Replace(row(""), "id: r", "id: ../../etc", 1), where: `\.yaml:\d+:\d+`},
		{name: "header with CRLF", says: `header|control|line`, yaml: strings.Replace(row(""), "model: m}", "model: m, headers: {X-Trace: \"a\\r\\nInjected: 1\"}}", 1), where: `\.yaml:\d+:\d+`},
		{name: "header name with a space", says: `header`, yaml: strings.Replace(row(""), "model: m}", "model: m, headers: {\"Bad Name\": x}}", 1), where: `\.yaml:\d+:\d+`},
		{name: "literal credential header", says: `header_env|credential|secret`, yaml: strings.Replace(row(""), "model: m}", "model: m, headers: {X-Goog-Api-Key: "+hostileSecret+"}}", 1), where: `\.yaml:\d+:\d+`},
		{name: "URL with a password", says: `credential|password`, yaml: strings.Replace(row(""), "http://127.0.0.1:9/v1", "http://u:"+hostileSecret+"@127.0.0.1:9/v1", 1), where: `\.yaml:\d+:\d+`},
		{name: "URL with a key in its query", says: `query`, yaml: strings.Replace(row(""), "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1?api_key="+hostileSecret, 1), where: `\.yaml:\d+:\d+`},
		{name: "--target with a password", yaml: row(""), args: []string{"--target", "http://u:" + hostileSecret + "@127.0.0.1:9/v1"}, where: `--target|target`},
		{name: "rule reads the clock", says: `now|clock`, yaml: row("acceptance:\n  - {name: clock, expect: now().Year() > 2000}\n"), where: `\.yaml:\d+:\d+`},
		{name: "ten thousand sweep values", says: `sweep|values|limit|at most`, yaml: hostileHead + "rows:\n  - id: s\n    requests: 1\n    input_tokens: 8\n    output_tokens: 2\n    sweep: {concurrency: [" + strings.Join(sweep, ", ") + "]}\n", where: `\.yaml:\d+:\d+`},
		{name: "tokenizer is /dev/zero", says: `regular file|not a file|device`, yaml: row("    tokenizer: /dev/zero\n"), where: `\.yaml:\d+:\d+`},
		{name: "dataset is a directory", says: `directory|regular file`, yaml: dataset("sub", "jsonl"), files: map[string]string{"sub/x": ""}, where: `\.yaml:\d+:\d+`},
		{name: "dataset is /dev/zero", says: `regular file|not a file|device`, yaml: dataset("/dev/zero", "sharegpt"), where: `\.yaml:\d+:\d+`},
		{name: "dataset is /dev/urandom", says: `regular file|not a file|device`, yaml: dataset("/dev/urandom", "jsonl"), where: `\.yaml:\d+:\d+`},
		{name: "trace timestamp 1e300", says: `timestamp`, yaml: trace,
			files: map[string]string{"t.jsonl": `{"timestamp": 0, "input_length": 16, "output_length": 4, "hash_ids": [1]}` + "\n" + `{"timestamp": 1e300, "input_length": 16, "output_length": 4, "hash_ids": [2]}` + "\n"},
			where: `t\.jsonl:2`},
		{name: "trace negative length", says: `length`, yaml: trace,
			files: map[string]string{"t.jsonl": `{"timestamp": 0, "input_length": -5, "output_length": 4, "hash_ids": [1]}` + "\n"},
			where: `t\.jsonl:1`},
		{name: "experiment is /dev/zero", says: `regular file|device`, path: "/dev/zero", where: `/dev/zero`},
		{name: "experiment is a directory", says: `regular file|directory`, path: "DIR", where: `read experiment|DIR`},
		{name: "experiment is a named pipe", says: `regular file|pipe`, fifo: "e.yaml", where: `e\.yaml`},
		{name: "dataset is a named pipe", says: `regular file|pipe`, yaml: dataset("p.jsonl", "jsonl"), fifo: "p.jsonl", where: `\.yaml:\d+:\d+`},
		{name: "nesting ten thousand deep", says: `depth|deep|nest`, yaml: hostileHead + "metadata: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\nrows: []\n", where: `\.yaml:\d+:\d+`},
		{name: "rule nested a hundred thousand deep", says: `expect|nest|deep|expression`, yaml: row("acceptance:\n  - {name: deep, expect: \"" + strings.Repeat("(", 100000) + "true" + strings.Repeat(")", 100000) + "\"}\n"), where: `\.yaml:\d+:\d+`},
		{name: "merge of scalars", says: `merge|<<`, yaml: row("    <<: [1, 2]\n"), where: `\.yaml:\d+:\d+`},
		{name: "key in api_key_env", says: `environment variable`, yaml: strings.Replace(row(""), "model: m}", "model: m, api_key_env: sk-"+hostileSecret+"}", 1), where: `\.yaml:\d+:\d+`},
		{name: "key in header_env", says: `environment variable`, yaml: strings.Replace(row(""), "model: m}", "model: m, header_env: {X-Api-Key: \"sk-"+hostileSecret+"\"}}", 1), where: `\.yaml:\d+:\d+`},
		{name: "credential header in a row", says: `header_env|credential`, yaml: row("    headers: {Private-Token: " + hostileSecret + "}\n"), where: `\.yaml:\d+:\d+`},
		{name: "row id with a terminal escape", says: `control|character`, yaml: strings.Replace(row(""), "id: r", "id: \"r\\e]0;pwned\\a\\e[2J\"", 1), where: `\.yaml:\d+:\d+`},
		{name: "experiment is huge", says: `MiB|large|size|limit`, yaml: row("") + "metadata:\n  pad: \"" + strings.Repeat("x", 8<<20) + "\"\n", where: `\.yaml`},
	}
}

// TestHostileCorpus runs each hostile case through validate and run.
func TestHostileCorpus(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(dir, "e.yaml")
			if tc.fifo != "e.yaml" {
				if err := os.WriteFile(file, []byte(strings.ReplaceAll(tc.yaml, "DIR", dir)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.fifo != "" {
				if err := syscall.Mkfifo(filepath.Join(dir, tc.fifo), 0o644); err != nil {
					t.Skipf("no named pipes here: %v", err)
				}
			}
			if tc.path != "" {
				file = strings.ReplaceAll(tc.path, "DIR", dir)
			}
			where := strings.ReplaceAll(tc.where, "DIR", regexp.QuoteMeta(dir))
			want := tc.code
			if want == 0 {
				want = exitInvalid
			}
			limit := tc.maxAlloc
			if limit == 0 {
				limit = 256 << 20
			}
			out := filepath.Join(dir, "run")
			for _, args := range [][]string{
				append([]string{"validate", file}, tc.args...),
				append([]string{"run", file, "--out", out, "--progress", "lines"}, tc.args...),
			} {
				if args[0] == "validate" && len(tc.args) > 0 {
					continue // validate has no --target
				}
				r, alloc := boundedCLI(t, 30*time.Second, args...)
				text := r.stdout + r.stderr
				if r.code != want {
					t.Errorf("%s: exit %d, want %d\n%s", args[0], r.code, want, clipText(text))
				}
				if !regexp.MustCompile(where).MatchString(text) {
					t.Errorf("%s: no position matching %s in:\n%s", args[0], where, clipText(text))
				}
				if tc.says != "" && !regexp.MustCompile("(?i)"+tc.says).MatchString(text) {
					t.Errorf("%s: the output does not say %s:\n%s", args[0], tc.says, clipText(text))
				}
				if strings.Contains(text, hostileSecret) {
					t.Errorf("%s: the secret is echoed:\n%s", args[0], clipText(text))
				}
				if strings.ContainsAny(text, "\x1b\x07") {
					t.Errorf("%s: an escape sequence reaches the terminal: %q", args[0], clipText(text))
				}
				if alloc > limit {
					t.Errorf("%s: allocated %d MiB, limit %d MiB", args[0], alloc>>20, limit>>20)
				}
				if len(text) > 64<<10 {
					t.Errorf("%s: %d bytes of output", args[0], len(text))
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("run left a run directory behind: %s", out)
			}
		})
	}
}

// boundedCLI runs the command line in-process and fails the test if it has
// not returned in time (a hang), returning the bytes allocated meanwhile.
func boundedCLI(t *testing.T, limit time.Duration, args ...string) (result, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	done := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- cli(t, ctx, args...) }()
	select {
	case r := <-done:
		runtime.ReadMemStats(&after)
		return r, after.TotalAlloc - before.TotalAlloc
	case <-time.After(limit):
		cancel()
		t.Fatalf("%v: no answer in %v", args, limit)
		return result{}, 0
	}
}

func clipText(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
