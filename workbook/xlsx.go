package workbook

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/infermatrix/infermatrix/record"
	"github.com/infermatrix/infermatrix/verdict"

	"github.com/xuri/excelize/v2"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// ResultsXLSX is the spreadsheet's file name in a run directory.
const ResultsXLSX = "results.xlsx"

// The spreadsheet's fixed sheets, in workbook order. The per-row request
// sheets follow them.
const (
	xlsxSheetSummary     = "Summary"
	xlsxSheetAcceptance  = "Acceptance"
	xlsxSheetPredictions = "Predictions"
	// xlsxSheetTelemetry and xlsxSheetDiagnosis follow Predictions
	// (xlsx_telemetry.go).
	xlsxSheetCharts   = "Charts"
	xlsxSheetMetadata = "Metadata"
)

// xlsxMaxRows is the most rows a worksheet may hold, header included:
// Excel's limit. A row with more requests continues on further sheets. Tests
// lower it to exercise the split.
var xlsxMaxRows = excelize.TotalRows

// xlsxMaxSheetName is Excel's limit on a sheet name's length, in UTF-16 units.
const xlsxMaxSheetName = excelize.MaxSheetNameLength

// WriteXLSX writes results.xlsx: the Summary (one line per row, coloured by
// verdict), Acceptance (one line per row and rule, with the failing clauses
// and their measured values), Predictions, Telemetry (the server's and
// GPUs' figures per row), Diagnosis (one line per finding), a Charts sheet with a native
// latency–throughput chart per sweep, Metadata (what was run on what, and
// which request sheet holds which row), and one sheet of raw requests per
// row, split across sheets beyond Excel's row limit.
//
// The request sheets are streamed from in.Records through excelize's
// StreamWriter, which spills to a temporary file past 16 MB, so a
// million-request row is never in memory as records or as cells. The
// compressed parts are spooled the same way (xlsxSpool) and written to w
// at the end, in name order; the file is never held whole.
//
// The same input gives a byte-identical file: the document's times come
// from the manifest, never the clock, and the zip's parts are written in
// name order (see xlsxSortedZip).
func WriteXLSX(w io.Writer, in *Input) error {
	if in.Summary == nil {
		return errors.New("write xlsx: no summary")
	}
	d := in.Decision
	if d == nil && in.Plan != nil {
		d = verdict.JudgeWith(in.Plan, in.Summary, in.Baseline)
	}
	x := &xlsxWriter{in: in, d: d, f: excelize.NewFile(), styles: map[xlsxStyleKey]int{}, used: map[string]bool{}}
	defer x.f.Close()
	// excelize writes a workbook into a buffer of its own, the whole
	// file, and copies that to w: a second copy of a 100 MB file. The
	// zip writer it is given writes to w instead, and the buffer stays
	// empty.
	x.f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return newXLSXSortedZip(w) })
	steps := []func() error{x.sheets, x.summary, x.acceptance, x.variants, x.predictions, x.telemetry, x.diagnosisSheet, x.charts, x.records, x.metadata, x.properties}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("write xlsx: %w", err)
		}
	}
	n, err := x.f.WriteTo(io.Discard)
	if err != nil {
		return fmt.Errorf("write xlsx: %w", err)
	}
	if n != 0 {
		return fmt.Errorf("write xlsx: excelize wrote %d bytes past the zip writer", n)
	}
	return nil
}

// xlsxWriter renders one workbook.
type xlsxWriter struct {
	in     *Input
	d      *verdict.Decision // in.Decision, or the plan's judgement of the summary
	f      *excelize.File
	styles map[xlsxStyleKey]int
	// used holds the sheet names taken, lower-cased: Excel compares
	// them without case.
	used map[string]bool
	// summaryLine maps a row id to its line on the Summary sheet.
	summaryLine map[string]int
	// requestSheets says which sheet holds which of a row's requests,
	// for the Metadata sheet.
	requestSheets []xlsxRequestSheet
	nCharts       int
}

// xlsxRequestSheet is one sheet of a row's requests.
type xlsxRequestSheet struct {
	Name, Row string
	Part      int
	Requests  int
	Note      string // set when the row has no sheet: why
}

// sheets creates the fixed sheets in order.
func (x *xlsxWriter) sheets() error {
	if err := x.f.SetSheetName("Sheet1", xlsxSheetSummary); err != nil {
		return err
	}
	x.used[strings.ToLower(xlsxSheetSummary)] = true
	for _, name := range []string{xlsxSheetAcceptance, xlsxSheetPredictions, xlsxSheetTelemetry, xlsxSheetDiagnosis, xlsxSheetCharts, xlsxSheetMetadata} {
		if _, err := x.f.NewSheet(name); err != nil {
			return err
		}
		x.used[strings.ToLower(name)] = true
	}
	return nil
}

// Cell formats.
type xlsxKind int

const (
	xlsxKindText     xlsxKind = iota
	xlsxKindInt               // #,##0 on a count
	xlsxKindMS                // 0.0: latencies and times in ms
	xlsxKindRate              // #,##0: token rates
	xlsxKindReqRate           // #,##0.00: request rates, often below 10
	xlsxKindPercent           // 0.0%: ratios shown as shares
	xlsxKindRatio             // 0.00: measured ÷ predicted
	xlsxKindDateTime          // a UTC timestamp
	xlsxKindHeader
	xlsxKindKey // a bold label, on the Metadata sheet
)

// Row fills, by verdict.
type xlsxFill int

const (
	xlsxFillNone xlsxFill = iota
	xlsxFillPass
	xlsxFillFail
)

type xlsxStyleKey struct {
	kind xlsxKind
	fill xlsxFill
}

// style returns the style of a kind of cell on a line with a fill, creating
// it on first use.
func (x *xlsxWriter) style(kind xlsxKind, fill xlsxFill) (int, error) {
	key := xlsxStyleKey{kind, fill}
	if id, ok := x.styles[key]; ok {
		return id, nil
	}
	s := &excelize.Style{}
	custom := func(f string) { s.CustomNumFmt = &f }
	switch kind {
	case xlsxKindInt, xlsxKindRate:
		s.NumFmt = 3 // #,##0
	case xlsxKindMS:
		custom("0.0")
	case xlsxKindReqRate:
		s.NumFmt = 4 // #,##0.00
	case xlsxKindPercent:
		custom("0.0%")
	case xlsxKindRatio:
		custom("0.00")
	case xlsxKindDateTime:
		custom("yyyy-mm-dd hh:mm:ss")
	case xlsxKindHeader:
		s.Font = &excelize.Font{Bold: true}
		s.Fill = excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"D9D9D9"}}
		s.Alignment = &excelize.Alignment{WrapText: true, Vertical: "center"}
		s.Border = []excelize.Border{{Type: "bottom", Color: "808080", Style: 1}}
	case xlsxKindKey:
		s.Font = &excelize.Font{Bold: true}
		s.Alignment = &excelize.Alignment{Vertical: "top"}
	}
	// Excel's own "Good" and "Bad" cell styles.
	switch fill {
	case xlsxFillPass:
		s.Fill = excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"C6EFCE"}}
		s.Font = &excelize.Font{Color: "006100"}
	case xlsxFillFail:
		s.Fill = excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"FFC7CE"}}
		s.Font = &excelize.Font{Color: "9C0006"}
	}
	id, err := x.f.NewStyle(s)
	if err != nil {
		return 0, err
	}
	x.styles[key] = id
	return id, nil
}

func xlsxVerdictFill(v string) xlsxFill {
	switch v {
	case verdict.Pass:
		return xlsxFillPass
	case verdict.Fail:
		return xlsxFillFail
	}
	return xlsxFillNone
}

// xlsxColumn is one column of a table: its header (with units), width and
// format.
type xlsxColumn struct {
	header string
	width  float64
	kind   xlsxKind
}

// table writes a header line, widths, a frozen header (and first column,
// with freezeCol) and an autofilter over lines of values. fills gives each
// line's fill. A nil value leaves the cell blank, styled.
func (x *xlsxWriter) table(sheet string, cols []xlsxColumn, lines [][]any, fills []xlsxFill, freezeCol bool) error {
	hdr, err := x.style(xlsxKindHeader, xlsxFillNone)
	if err != nil {
		return err
	}
	for i, c := range cols {
		name, _ := excelize.ColumnNumberToName(i + 1)
		if err := x.f.SetColWidth(sheet, name, name, c.width); err != nil {
			return err
		}
		if err := x.f.SetCellValue(sheet, name+"1", c.header); err != nil {
			return err
		}
		if err := x.f.SetCellStyle(sheet, name+"1", name+"1", hdr); err != nil {
			return err
		}
	}
	if err := x.f.SetRowHeight(sheet, 1, 45); err != nil { // three lines of a wrapped header
		return err
	}
	for i, vals := range lines {
		line := i + 2
		for j, v := range vals {
			cell, _ := excelize.CoordinatesToCellName(j+1, line)
			if v != nil {
				if err := x.f.SetCellValue(sheet, cell, xlsxText(v)); err != nil {
					return err
				}
			}
			id, err := x.style(cols[j].kind, fills[i])
			if err != nil {
				return err
			}
			if err := x.f.SetCellStyle(sheet, cell, cell, id); err != nil {
				return err
			}
		}
	}
	panes := &excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}
	if freezeCol {
		panes = &excelize.Panes{Freeze: true, XSplit: 1, YSplit: 1, TopLeftCell: "B2", ActivePane: "bottomRight"}
	}
	if err := x.f.SetPanes(sheet, panes); err != nil {
		return err
	}
	last, _ := excelize.CoordinatesToCellName(len(cols), max(len(lines), 1)+1)
	return x.f.AutoFilter(sheet, "A1:"+last, nil)
}

// note writes a line of text on a sheet that has no table.
func (x *xlsxWriter) note(sheet, cell, text string) error {
	return x.f.SetCellValue(sheet, cell, xlsxText(text))
}

// xlsxText is a cell's value with control characters and escape sequences
// removed from text (textsafe.Terminal): XML cannot hold most of them, and
// a model id or error message from the server is no place for them.
//
// Text needs no escaping against formulas here, unlike in summary.csv:
// excelize writes a string as a shared or inline string cell, never as a
// formula, so "=HYPERLINK(…)" is shown as written (xlsx_test.go checks).
func xlsxText(v any) any {
	if s, ok := v.(string); ok {
		return textsafe.Terminal(s)
	}
	return v
}

// Summary sheet columns read by the charts.
const (
	xlsxColOutputTokS = "Output tok/s"
	xlsxColTTFTp95    = "TTFT p95 (ms)"
	xlsxColTPOTp95    = "TPOT p95 (ms)"
	xlsxColE2Ep95     = "E2E p95 (ms)"
	xlsxColInputsS    = "Inputs/s"
)

// xlsxSummaryColumns are the Summary sheet's columns. pooled (some row
// calls embeddings or rerank) adds Inputs/s and Input tok/s after the
// output rates, as the results tables do: such a row's throughput is
// counted in inputs; a workbook without one keeps its columns.
func xlsxSummaryColumns(pooled bool) []xlsxColumn {
	cols := []xlsxColumn{
		{"Row", 28, xlsxKindText}, {"Verdict", 10, xlsxKindText}, {"Validity", 18, xlsxKindText}, {"Status", 12, xlsxKindText},
		{"Requests sent", 10, xlsxKindInt}, {"Requests OK", 10, xlsxKindInt}, {"Requests failed", 10, xlsxKindInt},
	}
	for _, m := range []string{"TTFT", "TPOT", "ITL", "E2E"} {
		for _, p := range []string{"p50", "p95", "p99"} {
			cols = append(cols, xlsxColumn{m + " " + p + " (ms)", 10, xlsxKindMS})
		}
	}
	cols = append(cols, xlsxColumn{xlsxColOutputTokS, 11, xlsxKindRate}, xlsxColumn{"Tok/s per user", 11, xlsxKindRate})
	if pooled {
		cols = append(cols, xlsxColumn{xlsxColInputsS, 10, xlsxKindReqRate}, xlsxColumn{"Input tok/s", 11, xlsxKindRate})
	}
	return append(cols,
		xlsxColumn{"Req/s", 9, xlsxKindReqRate}, xlsxColumn{"Goodput ratio", 10, xlsxKindPercent},
		xlsxColumn{"Errors", 8, xlsxKindInt}, xlsxColumn{"Errors by class", 24, xlsxKindText},
		xlsxColumn{"Client-bound", 10, xlsxKindText}, xlsxColumn{"In flight (mean)", 10, xlsxKindRate},
		xlsxColumn{"Cache hit ratio", 10, xlsxKindPercent}, xlsxColumn{"Zero-gap share", 10, xlsxKindPercent},
		xlsxColumn{"Why invalid", 60, xlsxKindText})
}

// xlsxCostColumns follow the Summary sheet's columns when the experiment
// sets a price (metrics.Cost); a workbook without one is unchanged.
func xlsxCostColumns() []xlsxColumn {
	return []xlsxColumn{{"Price per hour ($)", 10, xlsxKindReqRate}, {"$ per M output tokens", 11, xlsxKindReqRate},
		{"$ per M total tokens", 11, xlsxKindReqRate}, {"Output tokens per $", 12, xlsxKindRate}, {"Output tok/s per GPU", 11, xlsxKindRate}}
}

// xlsxCostCells are a row's cost cells, blank where a figure is absent:
// a pooled (embeddings or rerank) row has no output tokens per GPU.
func xlsxCostCells(rs *metrics.RowSummary, pooled bool) []any {
	c := rs.Cost
	if c == nil || rs.Status == metrics.RowNotRun {
		return make([]any, len(xlsxCostColumns()))
	}
	opt := func(v *float64) any {
		if v == nil {
			return nil
		}
		return xlsxNum(*v)
	}
	perGPU := xlsxNum(rs.Throughput.OutputTokensPerSPerGPU)
	if pooled {
		perGPU = nil
	}
	return []any{xlsxNum(c.USDPerHour), opt(c.USDPerMillionOutputTokens), opt(c.USDPerMillionTotalTokens),
		opt(c.OutputTokensPerUSD), perGPU}
}

// summary writes the Summary sheet: one line per row, in plan order.
func (x *xlsxWriter) summary() error {
	sum := x.in.Summary
	cols := xlsxSummaryColumns(x.anyPooled())
	priced := slices.ContainsFunc(sum.Rows, func(rs metrics.RowSummary) bool { return rs.Cost != nil })
	if priced {
		cols = append(cols, xlsxCostColumns()...)
	}
	verdicts := map[string]string{}
	valid := map[string]*verdict.RowVerdict{}
	probed := false // a search's probes say so (verdict.RowVerdict.Search)
	if x.d != nil {
		for i, rv := range x.d.Rows {
			verdicts[rv.ID] = record.MatrixVerdict(&x.d.Rows[i], sum.Row(rv.ID))
			valid[rv.ID] = &x.d.Rows[i]
			probed = probed || rv.Search != ""
		}
	}
	if probed {
		cols = append(cols, xlsxColumn{"Probe of search", 16, xlsxKindText}, xlsxColumn{"Probe", 6, xlsxKindInt})
	}
	x.summaryLine = map[string]int{}
	var lines [][]any
	var fills []xlsxFill
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		x.summaryLine[rs.ID] = i + 2
		status := rs.Status
		if rs.Error != "" {
			status += ": " + rs.Error
		}
		vals := []any{rs.ID, xlsxStr(verdicts[rs.ID]), xlsxStr(record.ValidityText(valid[rs.ID])), status}
		pooled := x.pooled(rs)
		if rs.Status == metrics.RowNotRun {
			vals = append(vals, make([]any, len(xlsxSummaryColumns(x.anyPooled()))-len(vals))...)
		} else {
			mt := rs.Metrics
			vals = append(vals, rs.Requests.Sent, rs.Requests.Completed, rs.Requests.Failed)
			for _, d := range []metrics.Dist{mt.TTFT, mt.TPOT, mt.ITL, mt.E2E} {
				vals = append(vals, xlsxStat(d, d.P50), xlsxStat(d, d.P95), xlsxStat(d, d.P99))
			}
			var goodput any
			if !sum.SLO.IsZero() {
				goodput = xlsxNum(rs.Goodput.Ratio)
			}
			var cache any
			if rs.Cache.Known() {
				cache = xlsxNum(rs.Cache.HitRatio)
			}
			var why []string
			if rv := valid[rs.ID]; rv != nil {
				for _, r := range rv.Validity.Reasons {
					why = append(why, r.Check+": "+r.Message)
				}
			}
			// A pooled row generates nothing: its output rates are
			// absent (blank), not 0, and its inputs/s stand in; a
			// generating row counts no inputs.
			t := rs.Throughput
			if pooled {
				vals = append(vals, nil, nil)
			} else {
				vals = append(vals, xlsxNum(t.OutputTokensPerS), xlsxNum(t.OutputTokensPerSU))
			}
			if x.anyPooled() {
				var inputs any
				if pooled {
					inputs = xlsxNum(t.InputsPerS)
				}
				vals = append(vals, inputs, xlsxNum(t.InputTokensPerS))
			}
			vals = append(vals, xlsxNum(rs.Throughput.RequestsPerS), goodput, rs.Errors.Total, xlsxStr(xlsxErrorClasses(rs)), rs.SelfCheck.ClientBound,
				xlsxNum(rs.InFlight.Mean), cache, xlsxNum(rs.SelfCheck.ZeroGapShare), xlsxStr(strings.Join(why, "; ")))
		}
		if priced {
			vals = append(vals, xlsxCostCells(rs, pooled)...)
		}
		if probed {
			if rv := valid[rs.ID]; rv != nil && rv.Search != "" {
				vals = append(vals, xlsxStr(rv.Search), rv.Probe)
			} else {
				vals = append(vals, nil, nil)
			}
		}
		lines = append(lines, vals)
		fills = append(fills, xlsxVerdictFill(verdicts[rs.ID]))
	}
	return x.table(xlsxSheetSummary, cols, lines, fills, true)
}

// xlsxErrorClasses lists a row's errors by class, in the fixed class order.
func xlsxErrorClasses(rs *metrics.RowSummary) string {
	var parts []string
	for _, c := range metrics.ErrorClasses {
		if n := rs.Errors.ByClass[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return strings.Join(parts, ", ")
}

// xlsxStat is a statistic of a distribution, or blank (nil) when it has no
// samples: a zero would read as a measurement.
func xlsxStat(d metrics.Dist, v float64) any {
	if d.Count == 0 {
		return nil
	}
	return xlsxNum(v)
}

// xlsxNum is v, or blank (nil) when it is not a xlsxNum number, which a
// spreadsheet cannot hold.
func xlsxNum(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func xlsxStr(s string) any {
	if s == "" {
		return nil
	}
	return textsafe.Terminal(s)
}

// acceptance writes the Acceptance sheet: one line per row and rule.
func (x *xlsxWriter) acceptance() error {
	d := x.d
	cols := []xlsxColumn{
		{"Row", 28, xlsxKindText}, {"Rule", 16, xlsxKindText}, {"Expect", 44, xlsxKindText}, {"Result", 9, xlsxKindText},
		{"Failing clauses (measured values)", 60, xlsxKindText}, {"Reason", 40, xlsxKindText},
	}
	var lines [][]any
	var fills []xlsxFill
	if d != nil {
		for _, rv := range d.Rows {
			for _, rr := range rv.Rules {
				res := verdict.Pass
				if !rr.Pass {
					res = verdict.Fail
				}
				lines = append(lines, []any{rv.ID, rr.Rule, rr.Expect, res, xlsxStr(xlsxFailedClauses(rr)), xlsxStr(rr.Reason)})
				fills = append(fills, xlsxVerdictFill(res))
			}
			if rv.Verdict != verdict.NotRun || x.in.Plan == nil {
				continue
			}
			// A row that did not run has rules but no results: list them,
			// so the sheet shows what is missing.
			why := "the row did not run"
			if rs := x.in.Summary.Row(rv.ID); rs != nil && rs.Status == metrics.RowFailed {
				why = strings.TrimSuffix("the tool failed during the row: "+rs.Error, ": ")
			}
			for _, a := range x.in.Plan.Acceptance {
				if slices.Contains(a.Rows, rv.ID) {
					lines = append(lines, []any{rv.ID, a.Name, a.Program.Source, verdict.NotRun, nil, why})
					fills = append(fills, xlsxFillNone)
				}
			}
		}
	}
	if len(lines) == 0 {
		return x.note(xlsxSheetAcceptance, "A1", "The experiment has no acceptance rules.")
	}
	return x.table(xlsxSheetAcceptance, cols, lines, fills, false)
}

// xlsxFailedClauses says which clauses of a rule failed, each with the measured
// values it read or why it could not be judged.
func xlsxFailedClauses(rr verdict.RuleResult) string {
	parts := make([]string, len(rr.Failed))
	for i, c := range rr.Failed {
		t := c.Text
		switch {
		case c.Reason != "":
			t += " (" + c.Reason + ")"
		case len(c.Values) > 0:
			t += " (" + record.FormatValues(c.Values) + ")"
		}
		parts[i] = t
	}
	return strings.Join(parts, "; ")
}

// predictions writes the Predictions sheet: every field of each row's
// prediction.
func (x *xlsxWriter) predictions() error {
	var preds []analysis.RowPrediction
	if x.in.Analysis != nil {
		preds = x.in.Analysis.Predictions
	}
	if len(preds) == 0 {
		return x.note(xlsxSheetPredictions, "A1", "The experiment makes no prediction (it has no predict section).")
	}
	cols := []xlsxColumn{
		{"Row", 28, xlsxKindText}, {"Context (tokens)", 11, xlsxKindInt}, {"Decode bound (tok/s per stream)", 13, xlsxKindRate},
		{"TPOT bound (ms)", 10, xlsxKindMS}, {"Prefill bound (ms)", 10, xlsxKindMS}, {"KV capacity (tokens)", 12, xlsxKindInt},
		{"Max concurrency (sequences)", 12, xlsxKindInt}, {"Measured TPOT p50 (ms)", 11, xlsxKindMS},
		{"TPOT measured ÷ bound", 11, xlsxKindRatio}, {"Measured TTFT p50 (ms)", 11, xlsxKindMS},
		{"TTFT measured ÷ bound", 11, xlsxKindRatio}, {"Regime", 22, xlsxKindText}, {"Evidence", 60, xlsxKindText},
	}
	// Measured values are zero when the row has no such measurement.
	measured := func(v float64) any {
		if v == 0 {
			return nil
		}
		return xlsxNum(v)
	}
	lines := make([][]any, len(preds))
	fills := make([]xlsxFill, len(preds))
	for i, p := range preds {
		lines[i] = []any{p.Row, xlsxNum(p.Context), xlsxNum(p.DecodeTokensPerS), xlsxNum(p.TPOTBoundMS), xlsxNum(p.PrefillBoundMS),
			p.KVCapacityTokens, p.MaxConcurrency, measured(p.MeasuredTPOTMS), measured(p.TPOTRatio),
			measured(p.MeasuredTTFTMS), measured(p.TTFTRatio), xlsxStr(p.Regime), xlsxStr(p.Evidence)}
	}
	return x.table(xlsxSheetPredictions, cols, lines, fills, true)
}

// xlsxCurve is one latency–throughput chart: a run of Summary lines.
type xlsxCurve struct {
	title, why string
	first      int  // first Summary line
	last       int  // last Summary line
	sweep      bool // a sweep's points, joined by lines
	// pooled charts embeddings or rerank rows, which generate no token:
	// p95 E2E against inputs/s rather than TTFT and TPOT against output
	// tokens/s, which they do not have.
	pooled bool
}

// charts draws, on the Charts sheet, a native chart of p95 TTFT and TPOT
// against output throughput for each sweep, or for all rows when there is
// none; embeddings and rerank rows, which generate no token, are charted
// as p95 E2E against inputs/s instead (xlsxCurve.pooled). The series
// reference the Summary sheet's cells, so the chart follows any edit
// there.
func (x *xlsxWriter) charts() error {
	var curves []xlsxCurve
	if x.in.Analysis != nil {
		for _, sw := range x.in.Analysis.Sweeps {
			c, ok := x.curve(sw.Rows)
			if !ok {
				continue
			}
			// Why is written for Markdown: its code spans' backticks go.
			c.title, c.why, c.sweep = textsafe.Terminal(sw.Base), textsafe.Terminal(strings.ReplaceAll(sw.Why, "`", "")), true
			c.pooled = x.allPooled(c.first, c.last)
			curves = append(curves, c)
		}
	}
	if len(curves) == 0 && len(x.in.Summary.Rows) > 0 {
		curves = x.allRowsCurves()
	}
	if len(curves) == 0 {
		return x.note(xlsxSheetCharts, "A1", "No rows to chart.")
	}
	head := "p95 TTFT and TPOT (ms, log scale) against output tokens/s, from the Summary sheet."
	if x.anyPooled() {
		head += " Embeddings and rerank rows generate no token, so have no TTFT, TPOT or output tokens/s: their charts are p95 E2E against inputs/s."
	}
	if err := x.note(xlsxSheetCharts, "A1", head); err != nil {
		return err
	}
	key, err := x.style(xlsxKindKey, xlsxFillNone)
	if err != nil {
		return err
	}
	col := func(header string) string {
		for i, c := range xlsxSummaryColumns(x.anyPooled()) {
			if c.header == header {
				name, _ := excelize.ColumnNumberToName(i + 1)
				return name
			}
		}
		panic("reports: no Summary column " + header)
	}
	xCol, ttftCol, tpotCol := col(xlsxColOutputTokS), col(xlsxColTTFTp95), col(xlsxColTPOTp95)
	var inputsCol, e2eCol string
	if x.anyPooled() {
		inputsCol, e2eCol = col(xlsxColInputsS), col(xlsxColE2Ep95)
	}
	ref := func(c string, first, last int) string {
		return fmt.Sprintf("%s!$%s$%d:$%s$%d", xlsxSheetSummary, c, first, c, last)
	}
	const step = 22 // sheet lines per chart: a title, a sentence, the chart
	for i, c := range curves {
		top := 3 + i*step
		if err := x.f.SetCellValue(xlsxSheetCharts, fmt.Sprintf("A%d", top), c.title); err != nil {
			return err
		}
		if err := x.f.SetCellStyle(xlsxSheetCharts, fmt.Sprintf("A%d", top), fmt.Sprintf("A%d", top), key); err != nil {
			return err
		}
		if c.why != "" {
			if err := x.f.SetCellValue(xlsxSheetCharts, fmt.Sprintf("A%d", top+1), c.why); err != nil {
				return err
			}
		}
		line := excelize.LineOptions{Type: excelize.LineSolid, Width: 1.75}
		if !c.sweep {
			line = excelize.LineOptions{Type: excelize.LineNone} // unrelated rows: points, no curve
		}
		xc := xCol
		if c.pooled {
			xc = inputsCol
		}
		series := func(yCol, symbol string) excelize.ChartSeries {
			return excelize.ChartSeries{
				Name:       fmt.Sprintf("%s!$%s$1", xlsxSheetSummary, yCol),
				Categories: ref(xc, c.first, c.last),
				Values:     ref(yCol, c.first, c.last),
				Line:       line,
				Marker:     excelize.ChartMarker{Symbol: symbol, Size: 6},
			}
		}
		title := func(s string) excelize.ChartTitle {
			return excelize.ChartTitle{Paragraph: []excelize.RichTextRun{{Text: s}}}
		}
		chart := &excelize.Chart{
			Type:      excelize.Scatter,
			Series:    []excelize.ChartSeries{series(ttftCol, "circle"), series(tpotCol, "square")},
			Title:     title(c.title + ": p95 latency against output throughput"),
			Legend:    excelize.ChartLegend{Position: "bottom"},
			Dimension: excelize.ChartDimension{Width: 720, Height: 360},
			XAxis:     excelize.ChartAxis{Title: title("Output tokens/s"), MajorGridLines: true},
			// TTFT and TPOT differ by an order of magnitude or more; a
			// log axis shows both curves' shapes on one chart.
			YAxis:        excelize.ChartAxis{Title: title("p95 latency (ms)"), LogBase: 10, MajorGridLines: true},
			ShowBlanksAs: "gap",
		}
		if c.pooled {
			chart.Series = []excelize.ChartSeries{series(e2eCol, "circle")}
			chart.Title = title(c.title + ": p95 E2E latency against inputs per second")
			chart.XAxis.Title = title("Inputs/s")
			chart.YAxis = excelize.ChartAxis{Title: title("p95 E2E latency (ms)"), MajorGridLines: true}
		}
		if err := x.f.AddChart(xlsxSheetCharts, fmt.Sprintf("A%d", top+2), chart); err != nil {
			return err
		}
		x.nCharts++
	}
	x.fixScatterX()
	return nil
}

// allPooled reports whether every Summary line from first to last is a
// pooled row's.
func (x *xlsxWriter) allPooled(first, last int) bool {
	for line := first; line <= last; line++ {
		if !x.pooled(&x.in.Summary.Rows[line-2]) {
			return false
		}
	}
	return true
}

// allRowsCurves chart a run without sweeps: its generating rows on one
// chart of points (a pooled row's cells there are blank, so it draws
// nothing and the chart says so), and each run of consecutive embeddings
// or rerank lines on a chart of its own, as a series is one range and a
// generating row's blank inputs/s must not be read as a point at 0.
func (x *xlsxWriter) allRowsCurves() []xlsxCurve {
	rows := x.in.Summary.Rows
	var curves, pooled []xlsxCurve
	generating := 0
	for i := range rows {
		line := i + 2
		if !x.pooled(&rows[i]) {
			generating++
			continue
		}
		if n := len(pooled); n > 0 && pooled[n-1].last == line-1 {
			pooled[n-1].last = line
			continue
		}
		pooled = append(pooled, xlsxCurve{first: line, last: line, pooled: true})
	}
	if generating > 0 {
		c := xlsxCurve{title: "All rows", first: 2, last: len(rows) + 1}
		if len(pooled) > 0 {
			c.title = "All generating rows"
			c.why = fmt.Sprintf("The %d embeddings and rerank rows are not on this chart: they generate no token, so have no TTFT, TPOT or output tokens/s. They are charted below, p95 E2E against inputs/s.",
				len(rows)-generating)
		}
		curves = append(curves, c)
	}
	for i := range pooled {
		c := &pooled[i]
		c.title = fmt.Sprintf("Embeddings and rerank rows %s to %s", textsafe.Terminal(rows[c.first-2].ID), textsafe.Terminal(rows[c.last-2].ID))
		if c.first == c.last {
			c.title = "Embeddings or rerank row " + textsafe.Terminal(rows[c.first-2].ID)
		}
	}
	return append(curves, pooled...)
}

// curve finds a sweep's rows on the Summary sheet. A chart series is one
// range, so the rows must be consecutive lines, as a sweep's expansion is
// in plan order; rows missing from the summary (not selected) are skipped.
func (x *xlsxWriter) curve(ids []string) (xlsxCurve, bool) {
	var c xlsxCurve
	for _, id := range ids {
		line, ok := x.summaryLine[id]
		if !ok {
			continue
		}
		switch {
		case c.first == 0:
			c.first, c.last = line, line
		case line == c.last+1:
			c.last = line
		default:
			return c, false
		}
	}
	return c, c.first > 0
}

// xlsxScatterXVal matches a scatter series' x values, which excelize refers to
// as text (strRef). Excel then plots the points at 1, 2, 3 … rather than at
// their values; a number reference (numRef) is what the format defines for
// numeric x values.
var xlsxScatterXVal = regexp.MustCompile(`<xVal><strRef>(<f>[^<]*</f>)</strRef></xVal>`)

// fixScatterX rewrites the charts' x values as number references.
func (x *xlsxWriter) fixScatterX() {
	for i := 1; i <= x.nCharts; i++ {
		name := fmt.Sprintf("xl/charts/chart%d.xml", i)
		v, ok := x.f.Pkg.Load(name)
		if !ok {
			continue
		}
		b, ok := v.([]byte)
		if !ok {
			continue
		}
		x.f.Pkg.Store(name, xlsxScatterXVal.ReplaceAll(b, []byte(`<xVal><numRef>$1</numRef></xVal>`)))
	}
}

// xlsxRecordColumns are the columns of a request sheet. Times are in ms:
// scheduled and start from the row's start, the others from the request's
// own start, as in requests.jsonl.
func xlsxRecordColumns() []xlsxColumn {
	return []xlsxColumn{
		{"Seq", 8, xlsxKindInt}, {"Request id", 22, xlsxKindText}, {"Warmup", 8, xlsxKindText}, {"HTTP status", 8, xlsxKindInt},
		{"Error class", 10, xlsxKindText}, {"Error message", 40, xlsxKindText},
		{"Scheduled (ms from row start)", 12, xlsxKindMS}, {"Start (ms from row start)", 12, xlsxKindMS}, {"Queue (ms)", 9, xlsxKindMS},
		{"First token (ms from request start)", 12, xlsxKindMS}, {"Last token (ms from request start)", 12, xlsxKindMS},
		{"End (ms from request start)", 12, xlsxKindMS},
		{"TTFT (ms)", 9, xlsxKindMS}, {"TPOT (ms)", 9, xlsxKindMS}, {"E2E (ms)", 9, xlsxKindMS},
		{"Input tokens requested", 10, xlsxKindInt}, {"Input tokens (server)", 10, xlsxKindInt}, {"Input tokens (client)", 10, xlsxKindInt},
		{"Output tokens requested", 10, xlsxKindInt}, {"Output tokens (server)", 10, xlsxKindInt}, {"Output tokens (client)", 10, xlsxKindInt},
		{"Retries", 8, xlsxKindInt}, {"Finish reason", 10, xlsxKindText}, {"Response id", 30, xlsxKindText},
	}
}

// xlsxRecordValues fills vals with a record's cells; nil leaves a cell empty.
func xlsxRecordValues(vals []any, r *metrics.Record) {
	clear(vals)
	ms := func(ns int64) any {
		if ns == 0 {
			return nil // the event did not happen
		}
		return float64(ns) / 1e6
	}
	tokens := func(t metrics.Tokens) (any, any, any) {
		var server any
		if t.Server != nil {
			server = *t.Server
		}
		return t.Requested, server, t.Client
	}
	vals[0], vals[1], vals[2] = r.Seq, xlsxStr(r.ID), r.Warmup
	if r.Status != 0 {
		vals[3] = r.Status
	}
	if r.Error != nil {
		vals[4], vals[5] = xlsxStr(r.Error.Class), xlsxStr(r.Error.Message)
	}
	vals[6], vals[7] = float64(r.ScheduledNS)/1e6, float64(r.StartNS)/1e6
	if r.QueueNS > 0 {
		vals[8] = float64(r.QueueNS) / 1e6
	}
	vals[9], vals[10], vals[11] = ms(r.FirstTokenNS), ms(r.LastTokenNS), ms(r.EndNS)
	if r.OK() {
		vals[12] = ms(r.FirstTokenNS)
		if v, ok := r.TPOTms(); ok {
			vals[13] = xlsxNum(v)
		}
		vals[14] = ms(r.EndToEndNS())
	}
	vals[15], vals[16], vals[17] = tokens(r.InputTokens)
	vals[18], vals[19], vals[20] = tokens(r.OutputTokens)
	vals[21], vals[22], vals[23] = r.Retries, xlsxStr(r.FinishReason), xlsxStr(r.ResponseID)
}

// records writes each row's requests to its own sheets, streamed.
func (x *xlsxWriter) records() error {
	if x.in.Records == nil {
		return nil
	}
	cols := xlsxRecordColumns()
	hdr, err := x.style(xlsxKindHeader, xlsxFillNone)
	if err != nil {
		return err
	}
	colStyles := make([]int, len(cols))
	for i, c := range cols {
		if colStyles[i], err = x.style(c.kind, xlsxFillNone); err != nil {
			return err
		}
	}
	perSheet := xlsxMaxRows - 1
	vals := make([]any, len(cols))
	for i := range x.in.Summary.Rows {
		rs := &x.in.Summary.Rows[i]
		if rs.Status == metrics.RowNotRun {
			x.requestSheets = append(x.requestSheets, xlsxRequestSheet{Row: rs.ID, Note: "the row did not run"})
			continue
		}
		base := xlsxSheetName("r-" + rs.ID)
		var sw *excelize.StreamWriter
		var cur *xlsxRequestSheet
		var line int
		open := func() error {
			part := 1
			if cur != nil {
				part = cur.Part + 1
			}
			name := base
			if part > 1 {
				suffix := fmt.Sprintf(" (%d)", part)
				name = xlsxTruncate(base, xlsxMaxSheetName-len(suffix)) + suffix
			}
			name = x.uniqueSheet(name)
			if _, err := x.f.NewSheet(name); err != nil {
				return err
			}
			var err error
			if sw, err = x.f.NewStreamWriter(name); err != nil {
				return err
			}
			for j, c := range cols {
				if err := sw.SetColWidth(j+1, j+1, c.width); err != nil {
					return err
				}
				if err := sw.SetColStyle(j+1, j+1, colStyles[j]); err != nil {
					return err
				}
			}
			if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
				return err
			}
			header := make([]any, len(cols))
			for j, c := range cols {
				header[j] = excelize.Cell{StyleID: hdr, Value: c.header}
			}
			if err := sw.SetRow("A1", header, excelize.RowOpts{Height: 45}); err != nil {
				return err
			}
			x.requestSheets = append(x.requestSheets, xlsxRequestSheet{Name: name, Row: rs.ID, Part: part})
			cur = &x.requestSheets[len(x.requestSheets)-1]
			line = 1
			return nil
		}
		err := x.in.Records(rs.ID, func(r *metrics.Record) error {
			if sw == nil || line > perSheet {
				if sw != nil {
					if err := sw.Flush(); err != nil {
						return err
					}
				}
				if err := open(); err != nil {
					return err
				}
			}
			line++
			xlsxRecordValues(vals, r)
			cur.Requests++
			return sw.SetRow("A"+strconv.Itoa(line), vals)
		})
		switch {
		case errors.Is(err, fs.ErrNotExist) && sw == nil:
			x.requestSheets = append(x.requestSheets, xlsxRequestSheet{Row: rs.ID, Note: "no records file"})
			continue
		case err != nil:
			return fmt.Errorf("requests of row %s: %w", rs.ID, err)
		case sw == nil:
			if err := open(); err != nil { // no requests: the header alone
				return err
			}
		}
		if err := sw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// xlsxSheetName replaces the characters Excel forbids in a sheet name
// ([ ] : * ? / \) with "_", and trims it to the length Excel allows. Row ids
// of sweeps contain "/" (saturation/c=16 becomes saturation_c=16); the
// Metadata sheet maps every sheet back to its row.
func xlsxSheetName(s string) string {
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune(`[]:*?/\`, r) {
			return '_'
		}
		return r
	}, s)
	s = strings.Trim(s, "'")
	return xlsxTruncate(s, xlsxMaxSheetName)
}

// xlsxTruncate cuts s to at most n UTF-16 units, the unit Excel counts a
// sheet name's length in, without splitting a character.
func xlsxTruncate(s string, n int) string {
	units := 0
	for i, r := range s {
		units += len(utf16.Encode([]rune{r}))
		if units > n {
			return s[:i]
		}
	}
	return s
}

// uniqueSheet makes a sheet name unique in the workbook (Excel ignores
// case), appending ~2, ~3 … within the length limit, and takes it. Names are
// taken in plan order, so the same run always gets the same names.
func (x *xlsxWriter) uniqueSheet(name string) string {
	cand := name
	for i := 2; x.used[strings.ToLower(cand)]; i++ {
		suffix := "~" + strconv.Itoa(i)
		cand = xlsxTruncate(name, xlsxMaxSheetName-len(suffix)) + suffix
	}
	x.used[strings.ToLower(cand)] = true
	return cand
}

// metadata writes the Metadata sheet: what was run, on what, when, and
// which sheet holds which row's requests. Secrets stay out: the API key
// never reaches the manifest, server headers (which may carry one) are not
// written, credentials in URLs are masked, and engine flags named like a
// secret show no value (package redact).
func (x *xlsxWriter) metadata() error {
	const sheet = xlsxSheetMetadata
	key, err := x.style(xlsxKindKey, xlsxFillNone)
	if err != nil {
		return err
	}
	dt, err := x.style(xlsxKindDateTime, xlsxFillNone)
	if err != nil {
		return err
	}
	if err := x.f.SetColWidth(sheet, "A", "A", 30); err != nil {
		return err
	}
	if err := x.f.SetColWidth(sheet, "B", "B", 90); err != nil {
		return err
	}
	if err := x.f.SetColWidth(sheet, "C", "D", 12); err != nil {
		return err
	}
	line := 0
	put := func(k string, v any, style int) error {
		if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
			return nil
		}
		line++
		a, b := fmt.Sprintf("A%d", line), fmt.Sprintf("B%d", line)
		if err := x.f.SetCellValue(sheet, a, k); err != nil {
			return err
		}
		if err := x.f.SetCellStyle(sheet, a, a, key); err != nil {
			return err
		}
		if err := x.f.SetCellValue(sheet, b, xlsxText(v)); err != nil {
			return err
		}
		if style != 0 {
			return x.f.SetCellStyle(sheet, b, b, style)
		}
		return nil
	}
	for _, kv := range x.metadataPairs() {
		if err := put(kv.key, kv.value, 0); err != nil {
			return err
		}
	}
	if man := x.in.Manifest; man != nil {
		if !man.Started.IsZero() {
			if err := put("Started (UTC)", man.Started.UTC(), dt); err != nil {
				return err
			}
		}
		if man.Ended != nil && !man.Ended.IsZero() {
			if err := put("Ended (UTC)", man.Ended.UTC(), dt); err != nil {
				return err
			}
			if err := put("Duration (s)", man.Ended.Sub(man.Started).Seconds(), 0); err != nil {
				return err
			}
		}
	}
	if err := put("Request sheets", xlsxRequestSheetsNote(x.in.Records != nil), 0); err != nil {
		return err
	}
	if len(x.requestSheets) == 0 {
		return nil
	}
	line += 2
	hdr, err := x.style(xlsxKindHeader, xlsxFillNone)
	if err != nil {
		return err
	}
	for i, h := range []string{"Sheet", "Row", "Part", "Requests"} {
		cell, _ := excelize.CoordinatesToCellName(i+1, line)
		if err := x.f.SetCellValue(sheet, cell, h); err != nil {
			return err
		}
		if err := x.f.SetCellStyle(sheet, cell, cell, hdr); err != nil {
			return err
		}
	}
	for _, rq := range x.requestSheets {
		line++
		vals := []any{rq.Name, rq.Row, rq.Part, rq.Requests}
		if rq.Name == "" {
			vals = []any{"(" + rq.Note + ")", rq.Row, nil, nil}
		}
		for i, v := range vals {
			if v == nil {
				continue
			}
			cell, _ := excelize.CoordinatesToCellName(i+1, line)
			if err := x.f.SetCellValue(sheet, cell, xlsxText(v)); err != nil {
				return err
			}
		}
	}
	return nil
}

func xlsxRequestSheetsNote(have bool) string {
	if !have {
		return "not written: the request records were not at hand"
	}
	return "the sheets after this one, named r-<row id> with [ ] : * ? / \\ replaced by _ (the table below maps them): " +
		"one line per request, warmup included, continued on numbered sheets past Excel's row limit. " +
		"Times in ms: scheduled and start from the row's start, the others from the request's start. " +
		"TTFT, TPOT and E2E by infermatrix's definitions (docs/metrics.md), whatever the summary's semantics."
}

type xlsxPair struct {
	key   string
	value any
}

// metadataPairs lists the run's facts as key and value; empty values are
// left out.
func (x *xlsxWriter) metadataPairs() []xlsxPair {
	var out []xlsxPair
	add := func(k string, v any) { out = append(out, xlsxPair{k, v}) }
	man := x.in.Manifest
	if man == nil {
		man = &rundir.Manifest{}
	}
	var exp *schema.Experiment
	if x.in.Plan != nil {
		exp = x.in.Plan.Experiment
	}
	name, desc := man.Experiment.Name, man.Experiment.Description
	if name == "" && exp != nil {
		name = exp.Name
	}
	if desc == "" && exp != nil {
		desc = exp.Description
	}
	if name == "" {
		name = x.in.Summary.Experiment
	}
	if record.Simulated(man) {
		add("SIMULATED", record.SimulatedBanner(man))
	}
	add("Experiment", name)
	add("Description", desc)
	add("Experiment file", man.Experiment.File)
	add("Experiment SHA-256", man.Experiment.SHA256)
	if x.d != nil {
		add("Verdict", x.d.Verdict)
		if len(x.d.Why) > 0 {
			add("Why", strings.Join(x.d.Why, "; "))
		}
		if x.d.Rebuilt != "" {
			add("Rebuilt", x.d.Rebuilt)
		}
	}
	if x.in.JudgedBy != "" {
		add("Re-judged", x.in.JudgedBy)
	}
	add("Run status", man.Status)
	add("Run error", man.Error)
	add("Tool version", man.Tool.Version)
	add("Tool commit", man.Tool.Commit)
	add("Go", man.Tool.Go)
	add("Command", xlsxCommand(man.Command))

	s := man.Server.Declared
	if !s.Builtin && len(s.URLs) == 0 && x.in.Plan != nil {
		s = x.in.Plan.Server
	}
	if s.Builtin {
		add("Server target", record.SimTarget(s.Sim))
	} else {
		urls := make([]string, len(s.URLs))
		for i, u := range s.URLs {
			urls[i] = redact.URL(u)
		}
		add("Server URLs", strings.Join(urls, ", "))
	}
	add("API", s.API)
	add("Model", s.Model)
	disc := man.Server.Discovered
	add("Discovered at", redact.URL(disc.URL))
	if ms := record.DiscoveredModels(disc); ms != "" {
		add("Server lists", ms)
	}
	add("Server header", disc.Server)
	add("Discovery error", disc.Error)
	add("Engine", s.Engine.Name)
	add("Engine version", s.Engine.Version)
	add("Discovered engine", strings.TrimSpace(disc.Engine+" "+disc.EngineVersion))
	if x.in.Plan != nil {
		for _, f := range record.ServerComparison(x.in.Plan, man) {
			if f.Mismatch != "" {
				add("Mismatch: "+f.Name, fmt.Sprintf("declared %s, discovered %s: %s", f.Declared, f.Discovered, f.Mismatch))
			}
		}
	}
	add("Engine image", s.Engine.Image)
	add("Engine flags", xlsxFlags(s.Engine.Flags))
	h := s.Hardware
	add("GPU", h.GPU)
	if h.Count > 0 {
		add("GPU count", h.Count)
	}
	add("Driver", h.Driver)
	add("CUDA", h.CUDA)
	add("Server host", h.Host)
	add("Hardware notes", h.Notes)
	if man.Host.Name != "" {
		add("Client host", fmt.Sprintf("%s (%s/%s, %d CPUs)", man.Host.Name, man.Host.OS, man.Host.Arch, man.Host.CPUs))
	}
	sum := x.in.Summary
	sem := sum.Semantics
	if sem == "" {
		sem = man.Semantics
	}
	if sem == "" {
		sem = metrics.SemInfermatrix
	}
	add("Semantics", sem)
	add("Semantics notes", strings.Join(sum.SemanticsNotes, "; "))
	if !sum.SLO.IsZero() {
		add("SLO (goodput)", record.SLOText(sum.SLO))
	}
	if sum.Interrupted {
		add("Interrupted", true)
	}
	meta := man.Experiment.Metadata
	if len(meta) == 0 && exp != nil {
		meta = exp.Metadata
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add("metadata."+k, fmt.Sprint(meta[k]))
	}
	return out
}

// xlsxCommand is the command as run, shell-quoted, with URL credentials
// masked.
func xlsxCommand(args []string) string {
	args = redact.Args(args)
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = record.ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// xlsxFlags formats engine flags in key order, with credentials masked
// (redact.Flags: vLLM's --api-key, an HF token, a URL's user info).
func xlsxFlags(flags map[string]any) string {
	if len(flags) == 0 {
		return ""
	}
	return record.FormatMap(redact.Flags(flags))
}

// xlsxEpoch stands in for a run's start when there is none, so that the
// file's dates never come from the clock.
var xlsxEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// properties sets the document properties. Created and modified are the
// run's start, not the time of writing, so that a re-render is identical.
func (x *xlsxWriter) properties() error {
	start := xlsxEpoch
	title := x.in.Summary.Experiment
	creator := "infermatrix"
	if man := x.in.Manifest; man != nil {
		if !man.Started.IsZero() {
			start = man.Started.UTC()
		}
		if man.Experiment.Name != "" {
			title = man.Experiment.Name
		}
		if record.Simulated(man) {
			title += " (SIMULATED)"
		}
		if man.Tool.Version != "" {
			creator += " " + man.Tool.Version
		}
	}
	stamp := start.Format("2006-01-02T15:04:05Z")
	if err := x.f.SetDocProps(&excelize.DocProperties{
		Title:          textsafe.Terminal(title),
		Subject:        "Benchmark results",
		Creator:        creator,
		LastModifiedBy: creator,
		Created:        stamp,
		Modified:       stamp,
		Language:       "en-US",
	}); err != nil {
		return err
	}
	return x.f.SetAppProps(&excelize.AppProperties{Application: "infermatrix"})
}

// xlsxSortedZip is the zip writer excelize writes the workbook through. It
// makes the file the same on every render, which excelize alone does not:
// it writes the streamed sheets in the order of a map, and adds the image
// types of [Content_Types].xml in the order of another. The parts are
// written in name order, and those types sorted.
//
// Each part is compressed as excelize writes it and kept until Close; one
// compressor serves every part, since excelize finishes a part before it
// starts the next (as archive/zip requires). The compressed parts are kept
// in a spool (xlsxSpool) that moves to a temporary file once it outgrows
// xlsxSpoolMemory: a million-request sheet compresses to about 100 MB,
// which would otherwise be held whole until the last part is written.
type xlsxSortedZip struct {
	w     *zip.Writer
	out   *xlsxZip64Patch
	fw    *flate.Writer
	spool xlsxSpool
	parts []*xlsxZipPart
	cur   *xlsxZipPart
}

// xlsxFlateLevel is archive/zip's own compression level: faster than
// flate's default for the same size on request sheets.
const xlsxFlateLevel = 5

// xlsxContentTypes is the part that lists the package's content types.
const xlsxContentTypes = "[Content_Types].xml"

type xlsxZipPart struct {
	name string
	// off and n locate the part's compressed bytes in the spool.
	off, n int64
	crc    uint32
	size   uint64
	fw     *flate.Writer
	// raw holds a part that is rewritten before it is compressed.
	raw *bytes.Buffer
}

func (p *xlsxZipPart) Write(b []byte) (int, error) {
	if p.raw != nil {
		return p.raw.Write(b)
	}
	p.crc = crc32.Update(p.crc, crc32.IEEETable, b)
	p.size += uint64(len(b))
	return p.fw.Write(b)
}

func newXLSXSortedZip(w io.Writer) *xlsxSortedZip {
	out := &xlsxZip64Patch{w: w}
	return &xlsxSortedZip{w: zip.NewWriter(out), out: out}
}

// xlsxZip64Patch sets the version a reader needs in the local header of a
// part over 4 GiB to 4.5 (ZIP64), as it is in the part's directory entry:
// archive/zip writes 2.0 there, and Excel calls such a file corrupt.
// excelize patches its own buffer for that; this writer patches the header
// as it passes, since the workbook no longer goes through that buffer.
type xlsxZip64Patch struct {
	w       io.Writer
	written int64
	// patch is written over the bytes from offset at on.
	at    int64
	patch []byte
}

func (p *xlsxZip64Patch) Write(b []byte) (int, error) {
	if len(p.patch) > 0 && p.at < p.written+int64(len(b)) {
		b = slices.Clone(b)
		for len(p.patch) > 0 && p.at < p.written+int64(len(b)) {
			b[p.at-p.written] = p.patch[0]
			p.patch, p.at = p.patch[1:], p.at+1
		}
	}
	n, err := p.w.Write(b)
	p.written += int64(n)
	return n, err
}

// Create starts a part.
func (z *xlsxSortedZip) Create(name string) (io.Writer, error) {
	if err := z.finish(); err != nil {
		return nil, err
	}
	p := &xlsxZipPart{name: name, off: z.spool.size}
	if z.fw == nil {
		fw, err := flate.NewWriter(&z.spool, xlsxFlateLevel)
		if err != nil {
			return nil, err
		}
		z.fw = fw
	} else {
		z.fw.Reset(&z.spool)
	}
	p.fw = z.fw
	if name == xlsxContentTypes {
		p.raw = &bytes.Buffer{}
	}
	z.parts = append(z.parts, p)
	z.cur = p
	return p, nil
}

// finish ends the part being written.
func (z *xlsxSortedZip) finish() error {
	p := z.cur
	if p == nil {
		return nil
	}
	if p.raw != nil {
		b := xlsxSortDefaults(p.raw.Bytes())
		p.raw = nil
		if _, err := p.Write(b); err != nil {
			return err
		}
	}
	z.cur, p.fw = nil, nil
	if err := z.fw.Close(); err != nil {
		return err
	}
	p.n = z.spool.size - p.off
	return z.spool.err
}

// xlsxDefaultType matches a Default element of [Content_Types].xml: the
// content type of a file extension.
var xlsxDefaultType = regexp.MustCompile(`<Default [^>]*?(?:/>|></Default>)`)

// xlsxSortDefaults sorts the Default elements of [Content_Types].xml in
// place. They form a set, so their order means nothing to a reader.
func xlsxSortDefaults(b []byte) []byte {
	locs := xlsxDefaultType.FindAllIndex(b, -1)
	elems := make([]string, len(locs))
	for i, l := range locs {
		elems[i] = string(b[l[0]:l[1]])
	}
	sort.Strings(elems)
	var out bytes.Buffer
	prev := 0
	for i, l := range locs {
		out.Write(b[prev:l[0]])
		out.WriteString(elems[i])
		prev = l[1]
	}
	out.Write(b[prev:])
	return out.Bytes()
}

// AddFS is not used by excelize when writing.
func (z *xlsxSortedZip) AddFS(fs.FS) error {
	return errors.New("sorted zip: AddFS is not supported")
}

// Close writes the parts in name order and the zip's directory.
func (z *xlsxSortedZip) Close() error {
	defer z.spool.close()
	if err := z.finish(); err != nil {
		return err
	}
	sort.Slice(z.parts, func(i, j int) bool { return z.parts[i].name < z.parts[j].name })
	for _, p := range z.parts {
		if p.size > math.MaxUint32 {
			// The local header starts at the next byte out.
			if err := z.w.Flush(); err != nil {
				return err
			}
			// The version needed to extract, little-endian.
			z.out.at, z.out.patch = z.out.written+4, []byte{45, 0}
		}
		w, err := z.w.CreateRaw(&zip.FileHeader{
			Name:               p.name,
			Method:             zip.Deflate,
			CRC32:              p.crc,
			CompressedSize64:   uint64(p.n),
			UncompressedSize64: p.size,
		})
		if err != nil {
			return err
		}
		if err := z.spool.copyTo(w, p.off, p.n); err != nil {
			return err
		}
	}
	return z.w.Close()
}

// xlsxSpoolMemory is how many compressed bytes the spool holds in memory
// before it moves them to a temporary file. A workbook of a few thousand
// requests stays in memory; a million-request one does not.
var xlsxSpoolMemory int64 = 16 << 20

// xlsxSpool is an append-only store of the compressed parts: a buffer, then
// a temporary file once it holds more than xlsxSpoolMemory. The first
// error sticks and is reported by the part that caused it.
type xlsxSpool struct {
	mem  bytes.Buffer
	file *os.File
	size int64
	err  error
}

func (s *xlsxSpool) Write(b []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.file == nil && s.size+int64(len(b)) > xlsxSpoolMemory {
		f, err := os.CreateTemp("", "infermatrix-xlsx-*")
		if err != nil {
			s.err = fmt.Errorf("spool the workbook: %w", err)
			return 0, s.err
		}
		s.file = f
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			s.err = fmt.Errorf("spool the workbook: %w", err)
			return 0, s.err
		}
		s.mem = bytes.Buffer{}
	}
	var n int
	if s.file != nil {
		n, s.err = s.file.Write(b)
	} else {
		n, _ = s.mem.Write(b)
	}
	s.size += int64(n)
	return n, s.err
}

// copyTo writes n bytes of the spool from off to w.
func (s *xlsxSpool) copyTo(w io.Writer, off, n int64) error {
	if s.file == nil {
		_, err := w.Write(s.mem.Bytes()[off : off+n])
		return err
	}
	_, err := io.Copy(w, io.NewSectionReader(s.file, off, n))
	return err
}

// close removes the temporary file, if there is one.
func (s *xlsxSpool) close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
		s.file = nil
	}
	s.mem = bytes.Buffer{}
}
