package schema

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a 1-based line and column in the experiment file.
type Pos struct {
	Line int `json:"line"`
	Col  int `json:"col"`
}

// Problem is one thing wrong with an experiment file. It prints in the
// compiler style editors and CI annotations understand:
//
//	experiments/x.yaml:12:5: rows[2].concurrency: expected an integer, got the string "eight"
//	    hint: write a whole number, e.g. concurrency: 8
type Problem struct {
	File    string `json:"file"`
	Pos     Pos    `json:"pos"`
	Path    string `json:"path"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Pos.Line, p.Pos.Col)
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Hint != "" {
		b.WriteString("\n    hint: ")
		b.WriteString(p.Hint)
	}
	return b.String()
}

// Problems is every problem found in one file, in file order. It is the error
// Load returns, so callers can print them all at once, as a reviewer fixing
// a file wants, rather than one per attempt.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// sorted orders problems by position and drops exact duplicates, which arise
// when a defaults value is wrong for several rows at once.
func (ps Problems) sorted() Problems {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		return a.Path < b.Path
	})
	out := ps[:0]
	for i, p := range ps {
		if i > 0 && p == ps[i-1] {
			continue
		}
		out = append(out, p)
	}
	return out
}
