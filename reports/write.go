package reports

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/infermatrix/infermatrix/verdict"
	"github.com/infermatrix/infermatrix/workbook"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/charts"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// File names reports adds to a run directory.
const (
	DecisionJSON = verdict.DecisionJSON
	AnalysisJSON = "analysis.json"
	SummaryCSV   = "summary.csv"
)

// Written says which files Write produced and which requested formats it
// could not.
type Written struct {
	Decision *verdict.Decision
	// Input is what the record was rendered from, judged: for the short
	// forms (WriteGitHub).
	Input *Input
	Files []string
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
//
// The verdict is what a run is for, so a format that fails to render (a
// plot, the spreadsheet) does not cost it: the other files are still
// written, and Write returns both the Written (with the decision) and an
// error naming what is missing. A nil Written means decision.md itself
// could not be written.
func Write(dir *rundir.Dir, in *Input) (*Written, error) {
	if in.Decision == nil {
		in.Decision = verdict.JudgeWith(in.Plan, in.Summary, in.Baseline)
	}
	if in.RunDir == "" {
		in.RunDir = dir.Path
	}
	if in.Records == nil {
		in.Records = recordsFor(dir, in.Plan)
	}
	if in.Analysis == nil {
		in.Analysis = analysis.Analyze(in.Plan, in.Summary, in.Decision)
	}
	w := &Written{Decision: in.Decision, Input: in}
	// The files streamed from the records do not need the plots: they
	// are written beside them, and all of them read each row's records
	// once (recordFan).
	fan := newRecordFan(in.Records, in.Summary, 1+streamedFormats(in.Plan.Formats))
	streams := startStreamed(dir, in, fan)
	defer streams.wait()
	add := func(name string, data []byte) error {
		if err := dir.WriteFile(name, data); err != nil {
			return err
		}
		w.Files = append(w.Files, name)
		return nil
	}
	var failed []error
	chartIn := in.chartInput()
	var chartsDone func()
	chartIn.Records, chartsDone = fan.reader(0)
	plots, err := charts.RenderPlots(chartIn)
	chartsDone()
	if err != nil {
		failed = append(failed, fmt.Errorf("render plots: %w", err))
		plots = nil
	}
	for _, p := range plots {
		for _, f := range []struct {
			ext  string
			data []byte
		}{{".png", p.PNG}, {".svg", p.SVG}} {
			if len(f.data) > 0 {
				if err := add(filepath.Join(PlotsDir, p.Name+f.ext), f.data); err != nil {
					failed = append(failed, err)
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
	for _, j := range []struct {
		name string
		v    any
	}{{DecisionJSON, in.Decision}, {AnalysisJSON, in.Analysis}} {
		if err := dir.WriteJSON(j.name, j.v); err != nil {
			failed = append(failed, err)
			continue
		}
		w.Files = append(w.Files, j.name)
	}
	for _, f := range in.Plan.Formats {
		var b bytes.Buffer
		var name string
		var err error
		switch f {
		case "markdown", "json":
			continue // always written: decision.md above, summary.json by the runner
		case "csv":
			name, err = SummaryCSV, writeCSV(&b, in.Summary, in.Decision, in.Plan)
		case "html":
			name, err = ReportHTML, WriteHTML(&b, in, plots)
		case "xlsx", "aiperf":
			// Streamed to the file (startStreamed): they hold every
			// request.
			name, err := streams.result(f)
			if err != nil {
				failed = append(failed, fmt.Errorf("render %s: %w", name, err))
				continue
			}
			w.Files = append(w.Files, name)
			continue
		default:
			w.Unsupported = append(w.Unsupported, f)
			continue
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("render %s: %w", name, err))
			continue
		}
		if b.Len() == 0 {
			w.Unsupported = append(w.Unsupported, f)
			continue
		}
		if err := add(name, b.Bytes()); err != nil {
			failed = append(failed, err)
		}
	}
	return w, errors.Join(failed...)
}

// chartInput is what the charts read of the record's input.
func (in *Input) chartInput() *charts.Input {
	return &charts.Input{Plan: in.Plan, Summary: in.Summary, Decision: in.Decision, Analysis: in.Analysis, Records: in.Records}
}

// workbookInput is what the spreadsheet reads of the record's input.
func (in *Input) workbookInput() *workbook.Input {
	return &workbook.Input{Plan: in.Plan, Manifest: in.Manifest, Summary: in.Summary, Decision: in.Decision,
		Analysis: in.Analysis, Records: in.Records, JudgedBy: in.JudgedBy, Baseline: in.Baseline}
}

// streamed holds the files Write streams from the records, each written by
// a goroutine of its own, by format.
type streamed struct {
	wg    sync.WaitGroup
	names map[string]string
	errs  map[string]error
}

// startStreamed starts writing the record-sized files the plan asks for:
// results.xlsx and profile_export.jsonl. Each goes through a temporary
// file renamed into place, so a million-request run's is never held in
// memory and a reader never sees half of one. They are independent of each
// other and of the plots, so they render while the plots do, on whatever
// cores there are.
//
// Each reads the records through fan, as its readers 1, 2 … in the order
// of streamedFormats.
func startStreamed(dir *rundir.Dir, in *Input, fan *recordFan) *streamed {
	s := &streamed{names: map[string]string{}, errs: map[string]error{}}
	var mu sync.Mutex
	reader := 0
	start := func(format, name string, render func(records func(string, func(*metrics.Record) error) error) func(io.Writer) error) {
		if !slices.Contains(in.Plan.Formats, format) {
			return
		}
		reader++
		records, done := fan.reader(reader)
		s.names[format] = name
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer done()
			err := writeStreamedFile(dir, name, render(records))
			mu.Lock()
			s.errs[format] = err
			mu.Unlock()
		}()
	}
	start("xlsx", workbook.ResultsXLSX, func(records func(string, func(*metrics.Record) error) error) func(io.Writer) error {
		wb := in.workbookInput()
		wb.Records = records
		return func(w io.Writer) error { return workbook.WriteXLSX(w, wb) }
	})
	start("aiperf", AIPerfExport, func(records func(string, func(*metrics.Record) error) error) func(io.Writer) error {
		ai := *in
		ai.Records = records
		return func(w io.Writer) error { return WriteAIPerf(w, &ai) }
	})
	return s
}

// recordsFor reads the records the reports of plan need: only the AIPerf
// export reads each token's arrival, and the plots and the spreadsheet
// skip decoding them (rundir.ReadRecordsLean).
func recordsFor(dir *rundir.Dir, plan *schema.Plan) func(string, func(*metrics.Record) error) error {
	if slices.Contains(plan.Formats, "aiperf") {
		return dir.ReadRecords
	}
	return dir.ReadRecordsLean
}

// streamedFormats counts the formats startStreamed writes.
func streamedFormats(formats []string) int {
	n := 0
	for _, f := range []string{"xlsx", "aiperf"} {
		if slices.Contains(formats, f) {
			n++
		}
	}
	return n
}

// wait waits for every streamed file.
func (s *streamed) wait() { s.wg.Wait() }

// result waits for every streamed file and returns the file name of a
// format and the error writing it.
func (s *streamed) result(format string) (string, error) {
	s.wg.Wait()
	return s.names[format], s.errs[format]
}

// writeStreamedFile writes a file of the run directory through render: a
// temporary file renamed into place.
func writeStreamedFile(dir *rundir.Dir, name string, render func(io.Writer) error) error {
	tmp, err := os.CreateTemp(dir.Path, ".tmp-*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(tmp, 1<<16)
	werr := render(bw)
	if werr == nil {
		werr = bw.Flush()
	}
	perr := tmp.Chmod(0o644)
	cerr := tmp.Close()
	if err := errors.Join(werr, perr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir.Path, name)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
