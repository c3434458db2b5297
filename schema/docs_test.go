package schema

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// docPath is the format reference, docs/experiment-format.md. These tests
// keep it from falling behind the types: every key, every allowed word and
// every expression name must be mentioned in it, and its examples must load
// (or, for deliberately invalid ones, fail exactly as the page says).
const docPath = "../docs/experiment-format.md"

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("read the format reference: %v", err)
	}
	return string(b)
}

// mentions reports whether the doc names word as inline code, `word`.
func mentions(doc, word string) bool {
	return strings.Contains(doc, "`"+word+"`")
}

// formatKeys walks every YAML key of the format from Experiment, through
// pointers, slices and inline structs (as fieldsOf flattens them), and
// returns each key name with the paths where it occurs, such as
// "rows[].rate.per_second".
func formatKeys() map[string][]string {
	keys := map[string][]string{}
	eachKey(func(path, _ string, f fieldInfo) {
		keys[f.name] = append(keys[f.name], path)
	})
	return keys
}

// TestDocsMentionEveryKey fails when a key of the format is not mentioned
// as `key` in the reference, listing every missing key with where it is.
func TestDocsMentionEveryKey(t *testing.T) {
	doc := readDoc(t)
	keys := formatKeys()
	if len(keys) < 60 {
		t.Fatalf("found only %d keys walking Experiment; the walk is broken", len(keys))
	}
	var missing []string
	for k, paths := range keys {
		if !mentions(doc, k) {
			missing = append(missing, fmt.Sprintf("`%s` (%s)", k, strings.Join(paths, ", ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not mention these keys as `key`:\n  %s", docPath, strings.Join(missing, "\n  "))
	}
}

// TestDocsMentionEveryAllowedWord fails when a word a key allows (its enum
// tag, or a report format) is not mentioned as `word` in the reference.
func TestDocsMentionEveryAllowedWord(t *testing.T) {
	doc := readDoc(t)
	words := map[string][]string{}
	for _, f := range Formats {
		words[f] = append(words[f], "report.formats")
	}
	eachKey(func(path, _ string, f fieldInfo) {
		if enum := f.field.Tag.Get("enum"); enum != "" {
			for _, w := range strings.Split(enum, ",") {
				words[w] = append(words[w], path)
			}
		}
	})
	var missing []string
	for w, paths := range words {
		if !mentions(doc, w) {
			missing = append(missing, fmt.Sprintf("`%s` (%s)", w, strings.Join(paths, ", ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not mention these allowed values as `value`:\n  %s", docPath, strings.Join(missing, "\n  "))
	}
}

// TestDocsMentionEveryMetricName fails when a name acceptance expressions
// can use is not in the reference. A distribution's statistics (ttft.p95)
// count as mentioned when the distribution (`ttft`) and the statistic
// (`p95`) both are, as the page documents them once for all distributions.
func TestDocsMentionEveryMetricName(t *testing.T) {
	doc := readDoc(t)
	names := metrics.RowNames()
	if len(names) < 20 {
		t.Fatalf("metrics.RowNames lists only %d names", len(names))
	}
	isName := map[string]bool{}
	for _, n := range names {
		isName[n] = true
	}
	hasChildren := map[string]bool{}
	for _, n := range names {
		if i := strings.LastIndex(n, "."); i > 0 {
			hasChildren[n[:i]] = true
		}
	}
	var missing []string
	for _, n := range names {
		// A group such as errors or throughput is not a value; its members
		// are checked one by one. A distribution (ttft) is both.
		if mentions(doc, n) || (hasChildren[n] && !isName[n+".p95"]) {
			continue
		}
		root, stat, ok := strings.Cut(n, ".")
		isDist := ok && isName[root+".p95"] && !strings.Contains(stat, ".")
		if isDist && mentions(doc, root) && mentions(doc, stat) {
			continue
		}
		missing = append(missing, "`"+n+"`")
	}
	if !strings.Contains(doc, "`p(") {
		missing = append(missing, "the function p(metric, q)")
	}
	if len(missing) > 0 {
		t.Errorf("%s does not mention these expression names:\n  %s", docPath, strings.Join(missing, "\n  "))
	}
}

// fence is one fenced code block of the reference.
type fence struct {
	line   int    // line of the opening ``` in the doc
	indent int    // columns of indentation removed from each line
	info   string // the info string: yaml, yaml-invalid, text, ...
	body   string
}

var fenceOpen = regexp.MustCompile("^( *)```([A-Za-z0-9_-]*)\\s*$")

// fences returns the doc's fenced code blocks in order. Blocks indented
// under a list item have that indentation removed.
func fences(t *testing.T, doc string) []fence {
	t.Helper()
	lines := strings.Split(doc, "\n")
	var out []fence
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent := len(m[1])
		f := fence{line: i + 1, indent: indent, info: m[2]}
		var body []string
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			l := lines[j]
			if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
				l = l[indent:]
			}
			body = append(body, l)
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: code block is never closed", docPath, f.line)
		}
		f.body = strings.Join(body, "\n") + "\n"
		out = append(out, f)
		i = j
	}
	return out
}

// isExperiment reports whether a block is a whole experiment file: its
// first line that is neither blank nor a comment starts with apiVersion.
func isExperiment(body string) bool {
	for _, l := range strings.Split(body, "\n") {
		s := strings.TrimSpace(l)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		return strings.HasPrefix(s, "apiVersion:")
	}
	return false
}

var summaryLine = regexp.MustCompile(`^\d+ of \d+ files? invalid$`)

// expectedOutput is a text block shown as the output of validating an
// invalid example: "$ " command lines and the closing "N of M file
// invalid" line, which come from the CLI rather than from Load, are left
// out.
func expectedOutput(body string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if strings.HasPrefix(l, "$ ") || summaryLine.MatchString(l) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// TestDocsExamples loads every ```yaml block of the reference that is a
// whole experiment file (it starts with apiVersion:), so examples never rot.
// A ```yaml-invalid block must fail to load; when the next block is a
// ```text block, it must show exactly the problems Load reports for the
// example saved as experiment.yaml. Blocks that are fragments of a file are
// not loaded.
func TestDocsExamples(t *testing.T) {
	blocks := fences(t, readDoc(t))
	valid, invalid := 0, 0
	for i, b := range blocks {
		if !isExperiment(b.body) {
			continue
		}
		switch b.info {
		case "yaml":
			valid++
			t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
				_, err := Parse(docPath, []byte(b.body), Options{})
				var ps Problems
				if errors.As(err, &ps) {
					// Point at the lines of the doc, not of the block.
					for j := range ps {
						if ps[j].Pos.Line > 0 {
							ps[j].Pos.Line += b.line
							ps[j].Pos.Col += b.indent
						}
					}
					err = ps
				}
				if err != nil {
					t.Errorf("%s:%d: example does not load:\n%v", docPath, b.line, err)
				}
			})
		case "yaml-invalid":
			invalid++
			t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
				_, err := Parse("experiment.yaml", []byte(b.body), Options{})
				var ps Problems
				if !errors.As(err, &ps) {
					t.Fatalf("%s:%d: invalid example loads without problems (err = %v); fence it as ```yaml", docPath, b.line, err)
				}
				if i+1 >= len(blocks) || blocks[i+1].info != "text" {
					return
				}
				out := blocks[i+1]
				if got, want := ps.Error(), expectedOutput(out.body); got != want {
					t.Errorf("%s:%d: the output shown is not what validation prints.\n got:\n%s\nwant (as in the doc):\n%s",
						docPath, out.line, got, want)
				}
			})
		}
	}
	if valid < 3 || invalid < 1 {
		t.Errorf("found %d loadable and %d invalid example files in %s; the block scanner is broken", valid, invalid, docPath)
	}
}
