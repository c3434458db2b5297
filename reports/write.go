package reports

import (
	"bytes"
	"fmt"

	"github.com/infermatrix/infermatrix/rundir"
)

// File names reports adds to a run directory.
const (
	DecisionJSON = "decision.json"
	SummaryCSV   = "summary.csv"
)

// Written says which files Write produced and which requested formats it
// could not.
type Written struct {
	Decision *Decision
	Files    []string
	// Unsupported lists requested formats this build does not render yet.
	Unsupported []string
}

// Write judges the run and writes its decision record into the run
// directory: decision.md and decision.json always (the record and its
// machine-readable verdicts), summary.csv when the experiment asks for csv.
// summary.json is the runner's and is already there.
func Write(dir *rundir.Dir, in *Input) (*Written, error) {
	if in.Decision == nil {
		in.Decision = Judge(in.Plan, in.Summary)
	}
	if in.RunDir == "" {
		in.RunDir = dir.Path
	}
	w := &Written{Decision: in.Decision}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, in); err != nil {
		return nil, fmt.Errorf("render decision record: %w", err)
	}
	if err := dir.WriteFile(rundir.DecisionFile, md.Bytes()); err != nil {
		return nil, err
	}
	w.Files = append(w.Files, rundir.DecisionFile)
	if err := dir.WriteJSON(DecisionJSON, in.Decision); err != nil {
		return nil, err
	}
	w.Files = append(w.Files, DecisionJSON)
	for _, f := range in.Plan.Formats {
		switch f {
		case "markdown", "json":
			// Always written: decision.md above, summary.json by the runner.
		case "csv":
			var b bytes.Buffer
			if err := WriteCSV(&b, in.Summary, in.Decision); err != nil {
				return nil, err
			}
			if err := dir.WriteFile(SummaryCSV, b.Bytes()); err != nil {
				return nil, err
			}
			w.Files = append(w.Files, SummaryCSV)
		default:
			w.Unsupported = append(w.Unsupported, f)
		}
	}
	return w, nil
}
