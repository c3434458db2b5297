package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Options adjust an experiment at load time, from the command line.
type Options struct {
	// Target overrides server.target/server.urls: "builtin" or a base URL.
	Target string
	// Rows keeps only these rows (base or expanded ids); empty keeps all.
	Rows []string
	// SkipFileChecks accepts files the experiment names (datasets,
	// traces, tokenizers) without checking that they exist. Re-rendering
	// a run reads its records, never these files, and may happen on
	// another machine or from another directory.
	SkipFileChecks bool
	// Baseline is the run the rules' baseline.<metric> names read (run
	// --baseline): a run directory or a folder of runs, relative to the
	// working directory. It overrides the file's baseline key.
	Baseline string
}

// ErrNotRegularFile is returned (wrapped) by Load for a path that is not a
// regular file: a directory, a device such as /dev/zero, or a named pipe,
// any of which would make reading it fail late or never end.
var ErrNotRegularFile = errors.New("not a regular file")

// Load reads, decodes and validates an experiment file. On failure the error
// is a Problems listing everything wrong with the file; any other error
// means the file could not be read.
//
// The file is checked before it is read: it must be a regular file of at
// most MaxFileBytes, and it is read through a limit in case it grows in
// between.
func Load(path string, opts Options) (*Plan, error) {
	// Stat before opening: opening a named pipe blocks until something
	// writes to it.
	if err := checkRegular(path, os.Stat); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	defer f.Close()
	// Again on what was opened, in case the path changed in between.
	if err := checkRegular(path, func(string) (fs.FileInfo, error) { return f.Stat() }); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	return Parse(path, data, opts)
}

// checkRegular refuses a path that is not a regular file, or one larger
// than MaxFileBytes.
func checkRegular(path string, stat func(string) (fs.FileInfo, error)) error {
	fi, err := stat(path)
	if err != nil {
		return fmt.Errorf("read experiment: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("read experiment %s: %w (it is %s)", path, ErrNotRegularFile, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxFileBytes {
		return Problems{tooLarge(path, fi.Size())}
	}
	return nil
}

// fileKind names what a path that is not a regular file is, for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

func tooLarge(path string, size int64) Problem {
	return Problem{File: path, Pos: Pos{1, 1},
		Message: fmt.Sprintf("the file is %s, over the %s limit for an experiment file", byteSize(size), byteSize(MaxFileBytes)),
		Hint:    "an experiment describes rows and rules; prompts belong in a dataset file, and many rows in a sweep"}
}

// byteSize writes a size the way people read it: 57.2 MB, 1 MiB.
func byteSize(n int64) string {
	switch {
	case n == MaxFileBytes:
		return "1 MiB"
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Parse is Load for bytes already read. path names the file in messages and
// anchors relative paths inside it.
func Parse(path string, data []byte, opts Options) (*Plan, error) {
	if len(data) > MaxFileBytes {
		return nil, Problems{tooLarge(path, int64(len(data)))}
	}
	d := newDecoder(path)
	exp := &Experiment{}
	doc, probs := parseDocument(path, data)
	if len(probs) > 0 {
		return nil, probs
	}
	if !d.checkNodes(doc) {
		return nil, d.problems.sorted()
	}
	d.value(doc.Content[0], "", reflect.ValueOf(exp).Elem(), nil)

	r := &resolver{d: d, exp: exp, dir: filepath.Dir(path), lines: strings.Split(string(data), "\n")}
	plan := r.resolve(opts)
	r.baseline(opts, plan)
	r.telemetryOff(plan)
	r.costUnset(plan)
	if len(d.problems) > 0 {
		return nil, d.problems.sorted()
	}
	plan.Experiment = exp
	plan.File = path
	plan.Dir = r.dir
	plan.Source = data
	plan.SHA256 = hashOf(data)
	return plan, nil
}

// parseDocument parses the file's one YAML document. yaml.Unmarshal would
// read the first document and silently drop the rest, so the file is read
// with a Decoder and a second document is an error.
func parseDocument(path string, data []byte) (*yaml.Node, Problems) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, Problems{syntaxProblem(path, data, err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, Problems{{File: path, Pos: Pos{1, 1}, Message: "the file is empty",
			Hint: "start with apiVersion: " + APIVersion + ", then name, server and rows; see docs/experiment-format.md"}}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &doc, nil
	case err != nil:
		return nil, Problems{syntaxProblem(path, data, err)}
	}
	p := Problem{File: path, Pos: Pos{1, 1}, Message: "the file holds more than one YAML document",
		Hint: "put each experiment in its own file; a line of --- starts a new document"}
	if next.Line > 0 {
		p.Pos = posOf(&next)
	}
	return nil, Problems{p}
}

// syntaxProblem turns a YAML syntax error into a positioned problem.
// yaml.v3 says "yaml: line 7: did not find expected key" for most errors,
// but leaves the line out on the first line, for unknown anchors, and for
// bytes that are not UTF-8 text; those are found in the data.
func syntaxProblem(path string, data []byte, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := Problem{File: path, Pos: Pos{1, 1}, Message: "invalid YAML: " + msg}
	var line int
	if off, what := badByte(data); off >= 0 && isReaderError(msg) {
		p.Pos = offsetPos(data, off)
		p.Message = "invalid YAML: " + what
		p.Hint = "an experiment file is UTF-8 text; is this a binary file?"
	} else if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil && line >= 1 {
		p.Pos = Pos{Line: line, Col: 1}
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
		p.Message = "invalid YAML: " + msg
	} else if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		name = strings.TrimSuffix(name, "' referenced")
		if i := aliasOffset(data, name); i >= 0 {
			p.Pos = offsetPos(data, i)
		}
		p.Hint = "define the anchor (&" + name + ") before the alias uses it"
	}
	if strings.Contains(msg, "found character that cannot start any token") || strings.Contains(msg, "tab character") {
		p.Hint = "YAML indents with spaces, never tabs"
		if pos, ok := indentTab(data, p.Pos.Line); ok {
			p.Pos = pos
		}
	}
	return p
}

// isReaderError reports whether a yaml.v3 error is about the bytes of the
// stream rather than its syntax.
func isReaderError(msg string) bool {
	for _, m := range []string{"UTF-8", "UTF-16", "control characters", "Unicode"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// badByte finds the first byte a YAML reader refuses: one that is not
// UTF-8, or a character YAML does not allow in a stream (control
// characters other than tab and line breaks, surrogates, U+FFFE, U+FFFF).
// It returns -1 when every byte is allowed.
func badByte(data []byte) (int, string) {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return i, fmt.Sprintf("byte 0x%02x is not UTF-8 text", data[i])
		case r == 0x9 || r == 0xA || r == 0xD || r == 0x85,
			r >= 0x20 && r <= 0x7E, r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000:
		default:
			return i, fmt.Sprintf("control character %U is not allowed", r)
		}
		i += n
	}
	return -1, ""
}

// aliasOffset finds the first use of an alias (*name) outside a comment,
// or returns -1.
func aliasOffset(data []byte, name string) int {
	want := []byte("*" + name)
	for from := 0; ; {
		i := bytes.Index(data[from:], want)
		if i < 0 {
			return -1
		}
		i += from
		start := bytes.LastIndexByte(data[:i], '\n') + 1
		end := i + len(want)
		if !bytes.ContainsRune(data[start:i], '#') && (end == len(data) || bytes.IndexByte([]byte(" \t\r\n,]}"), data[end]) >= 0) {
			return i
		}
		from = i + 1
	}
}

// offsetPos converts a byte offset to a 1-based line and a column in
// characters, as yaml.Node positions count them.
func offsetPos(data []byte, off int) Pos {
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return Pos{Line: line, Col: 1 + utf8.RuneCount(data[start:off])}
}

// indentTab finds the first tab in a line's indentation, from the given
// 1-based line on: yaml.v3 reports a tab error at the line of the
// enclosing block, which may be above the tab.
func indentTab(data []byte, from int) (Pos, bool) {
	for i, l := range bytes.Split(data, []byte("\n")) {
		if i+1 < from {
			continue
		}
		indent := l[:len(l)-len(bytes.TrimLeft(l, " \t-"))]
		if j := bytes.IndexByte(indent, '\t'); j >= 0 {
			return Pos{Line: i + 1, Col: j + 1}, true
		}
	}
	return Pos{}, false
}

// statFile checks that a path named in the experiment is a regular file,
// relative to the experiment's directory, and returns the resolved path.
// A directory, a device such as /dev/zero or a named pipe would fail, or
// never finish, when the run reads it, after the server has been sent work.
func (r *resolver) statFile(path, name string) string {
	if name == "" {
		return ""
	}
	full := r.resolvePath(name)
	if r.skipFiles {
		return full
	}
	if fi, ok := r.stat(path, name, full); ok && !fi.Mode().IsRegular() {
		r.problem(path, "name a regular file: directories, devices and pipes cannot be read as data",
			"%q is %s, not a file", name, fileKind(fi.Mode()))
	}
	return full
}

// statTokenizer checks a tokenizer path as tokenizer.New will read it: a
// tokenizer.json file, or a directory holding one (or GPT-2's encoder.json
// and vocab.bpe). Each file must be regular and at most MaxTokenizerBytes,
// since it is read whole into memory.
func (r *resolver) statTokenizer(path, name string) string {
	full := r.resolvePath(name)
	if r.skipFiles {
		return full
	}
	fi, ok := r.stat(path, name, full)
	if !ok {
		return full
	}
	files := []string{full}
	if !strings.HasSuffix(name, ".json") {
		if !fi.IsDir() {
			r.problem(path, "write builtin, the path of a Hugging Face tokenizer.json, or a directory holding one",
				"%q is %s, not a tokenizer.json or a directory", name, fileKind(fi.Mode()))
			return full
		}
		files = nil
		for _, set := range [][]string{{"tokenizer.json"}, {"encoder.json", "vocab.bpe"}} {
			found := true
			for _, f := range set {
				if _, err := os.Lstat(filepath.Join(full, f)); err != nil {
					found = false
				}
			}
			if found {
				for _, f := range set {
					files = append(files, filepath.Join(full, f))
				}
				break
			}
		}
		if files == nil {
			r.problem(path, "download the model's tokenizer.json into it, or name the file itself",
				"directory %q holds neither tokenizer.json nor encoder.json and vocab.bpe", name)
			return full
		}
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		shown := name
		if f != full {
			shown = filepath.Join(name, filepath.Base(f))
		}
		switch {
		case err != nil:
			r.problem(path, "", "cannot read tokenizer file %q: %v", shown, err)
		case !fi.Mode().IsRegular():
			r.problem(path, "name a regular file: directories, devices and pipes cannot be read as a tokenizer",
				"%q is %s, not a file", shown, fileKind(fi.Mode()))
		case fi.Size() > MaxTokenizerBytes:
			r.problem(path, fmt.Sprintf("tokenizer files are read whole; the limit is %d MiB", MaxTokenizerBytes>>20),
				"tokenizer file %q is %s, too large for a tokenizer", shown, byteSize(fi.Size()))
		}
	}
	return full
}

// resolvePath makes a path in the experiment relative to its directory.
func (r *resolver) resolvePath(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(r.dir, name)
}

// stat reports a path that does not exist or cannot be examined.
func (r *resolver) stat(path, name, full string) (fs.FileInfo, bool) {
	fi, err := os.Stat(full)
	if err != nil {
		hint := "paths are relative to the experiment file's directory"
		if !errors.Is(err, fs.ErrNotExist) {
			hint = err.Error()
		}
		r.problem(path, hint, "file %q not found", name)
		return nil, false
	}
	return fi, true
}
