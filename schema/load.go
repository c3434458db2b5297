package schema

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

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
}

// Load reads, decodes and validates an experiment file. On failure the error
// is a Problems listing everything wrong with the file; any other error
// means the file could not be read.
func Load(path string, opts Options) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	return Parse(path, data, opts)
}

// Parse is Load for bytes already read. path names the file in messages and
// anchors relative paths inside it.
func Parse(path string, data []byte, opts Options) (*Plan, error) {
	d := newDecoder(path)
	exp := &Experiment{}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, Problems{syntaxProblem(path, err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, Problems{{File: path, Pos: Pos{1, 1}, Message: "the file is empty",
			Hint: "start with apiVersion: " + APIVersion + ", then name, server and rows; see docs/experiment-format.md"}}
	}
	if len(doc.Content) > 1 {
		d.addf(doc.Content[1], "", "put each experiment in its own file", "the file holds more than one YAML document")
	}
	d.value(doc.Content[0], "", reflect.ValueOf(exp).Elem(), nil)

	r := &resolver{d: d, exp: exp, dir: filepath.Dir(path), lines: strings.Split(string(data), "\n")}
	plan := r.resolve(opts)
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

// syntaxProblem turns a YAML syntax error ("yaml: line 7: did not find
// expected key") into a positioned problem.
func syntaxProblem(path string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := Problem{File: path, Message: "invalid YAML: " + msg}
	var line int
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
		p.Pos = Pos{Line: line, Col: 1}
		p.Message = "invalid YAML: " + strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	if strings.Contains(msg, "found character that cannot start any token") {
		p.Hint = "YAML indents with spaces, never tabs"
	}
	return p
}

// IsProblems reports whether err lists problems with the experiment file
// (as opposed to the file being unreadable).
func IsProblems(err error) bool {
	var ps Problems
	return errors.As(err, &ps)
}

// statFile checks that a path named in the experiment exists, relative to
// the experiment's directory, and returns the resolved path.
func (r *resolver) statFile(path, name string) string {
	if name == "" {
		return ""
	}
	full := name
	if !filepath.IsAbs(name) {
		full = filepath.Join(r.dir, name)
	}
	if r.skipFiles {
		return full
	}
	if _, err := os.Stat(full); err != nil {
		hint := "paths are relative to the experiment file's directory"
		if !errors.Is(err, fs.ErrNotExist) {
			hint = err.Error()
		}
		r.problem(path, hint, "file %q not found", name)
	}
	return full
}
