package reports

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/infermatrix/infermatrix/rundir"
)

// File names reports adds to a run directory.
const (
	DecisionJSON = "decision.json"
	AnalysisJSON = "analysis.json"
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

// PlotsDir is the folder of a run directory the plots are written to, each
// as PNG and SVG.
const PlotsDir = "plots"

// Write judges the run and writes its decision record into the run
// directory: decision.md and decision.json always (the record and its
// machine-readable verdicts), analysis.json (predictions and operating
// points), the plots, and whichever of summary.csv, report.html,
// results.xlsx and profile_export.jsonl the experiment asks for.
// summary.json is the runner's and is already there.
func Write(dir *rundir.Dir, in *Input) (*Written, error) {
	if in.Decision == nil {
		in.Decision = Judge(in.Plan, in.Summary)
	}
	if in.RunDir == "" {
		in.RunDir = dir.Path
	}
	if in.Records == nil {
		in.Records = dir.ReadRecords
	}
	if in.Analysis == nil {
		in.Analysis = Analyze(in)
	}
	w := &Written{Decision: in.Decision}
	add := func(name string, data []byte) error {
		if err := dir.WriteFile(name, data); err != nil {
			return err
		}
		w.Files = append(w.Files, name)
		return nil
	}
	plots, err := RenderPlots(in)
	if err != nil {
		return nil, fmt.Errorf("render plots: %w", err)
	}
	for _, p := range plots {
		for _, f := range []struct {
			ext  string
			data []byte
		}{{".png", p.PNG}, {".svg", p.SVG}} {
			if len(f.data) > 0 {
				if err := add(filepath.Join(PlotsDir, p.Name+f.ext), f.data); err != nil {
					return nil, err
				}
			}
		}
	}
	in.plots = plots
	var md bytes.Buffer
	if err := WriteMarkdown(&md, in); err != nil {
		return nil, fmt.Errorf("render decision record: %w", err)
	}
	if err := add(rundir.DecisionFile, md.Bytes()); err != nil {
		return nil, err
	}
	if err := dir.WriteJSON(DecisionJSON, in.Decision); err != nil {
		return nil, err
	}
	w.Files = append(w.Files, DecisionJSON)
	if err := dir.WriteJSON(AnalysisJSON, in.Analysis); err != nil {
		return nil, err
	}
	w.Files = append(w.Files, AnalysisJSON)
	for _, f := range in.Plan.Formats {
		var b bytes.Buffer
		var name string
		var err error
		switch f {
		case "markdown", "json":
			continue // always written: decision.md above, summary.json by the runner
		case "csv":
			name, err = SummaryCSV, WriteCSV(&b, in.Summary, in.Decision)
		case "html":
			name, err = ReportHTML, WriteHTML(&b, in, plots)
		case "xlsx":
			name, err = ResultsXLSX, WriteXLSX(&b, in)
		case "aiperf":
			// Streamed to the file: it holds every request.
			if err := writeAIPerfFile(dir, in); err != nil {
				return nil, fmt.Errorf("render %s: %w", AIPerfExport, err)
			}
			w.Files = append(w.Files, AIPerfExport)
			continue
		default:
			w.Unsupported = append(w.Unsupported, f)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		if b.Len() == 0 {
			w.Unsupported = append(w.Unsupported, f)
			continue
		}
		if err := add(name, b.Bytes()); err != nil {
			return nil, err
		}
	}
	return w, nil
}
