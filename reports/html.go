package reports

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/record"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/charts"
	"github.com/infermatrix/infermatrix/internal/htmlstyle"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// ReportHTML is the self-contained page's file name in a run directory.
const ReportHTML = "report.html"

// WriteHTML writes report.html: the decision record as one self-contained
// page, in decision.md's order, with the plots inline.
//
// The page loads nothing: its styles are inline, it has no script, and each
// plot is a data: URL (SVG, or PNG where a plot has no SVG) in an <img>, so
// that the plot's text, which comes from the experiment, is drawn as an
// image and never parsed as part of the page. A Content-Security-Policy
// forbids every other source, so even a browser that would fetch
// something cannot. Every string from the experiment, the server or the
// run goes through html/template's escaping. The same input gives the
// same bytes: nothing depends on the time of rendering or on map order.
//
// html/template leaves control characters alone, so the page is rendered
// whole and then loses them (textsafe.Terminal): an escape sequence in a
// model id must not reach a terminal that shows the file, and a bidi
// override must not reorder what a browser shows.
func WriteHTML(w io.Writer, in *Input, plots []charts.Plot) error {
	v := newHTMLView(in, plots)
	var b strings.Builder
	if err := htmlPage.Execute(&b, v); err != nil {
		return fmt.Errorf("write report.html: %w", err)
	}
	if _, err := io.WriteString(w, textsafe.Terminal(b.String())); err != nil {
		return fmt.Errorf("write report.html: %w", err)
	}
	return nil
}

// seg is a piece of text, shown as code or as prose.
type seg struct {
	Text string
	Code bool
}

func prose(s string) seg { return seg{Text: s} }
func mono(s string) seg  { return seg{Text: s, Code: true} }

// mdSegs reads the code spans of a sentence written for Markdown (the
// analysis writes its explanations so), as code; the rest stays prose.
func mdSegs(s string) []seg {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 {
		return []seg{prose(s)} // an odd number of backticks: not code spans
	}
	var out []seg
	for i, p := range parts {
		if p != "" {
			out = append(out, seg{Text: p, Code: i%2 == 1})
		}
	}
	return out
}

// descriptionSegs splits the description into paragraphs as decision.md
// does, each read for its code spans; the rest is text, escaped by the
// template.
func descriptionSegs(desc string) [][]seg {
	var out [][]seg
	for _, p := range textsafe.Paragraphs(desc) {
		out = append(out, mdSegs(p))
	}
	return out
}

type htmlView struct {
	Title string
	Name  string
	// Description is the experiment's description, one paragraph each,
	// as decision.md keeps them, with its code spans shown as code.
	Description [][]seg
	Interrupted bool
	Verdict     htmlVerdict
	// Answer is each question's answer under the verdict
	// (record.AnswerOf), the first thing the page says.
	Answer      []htmlAnswer
	ClientBound []string
	Hypotheses  []htmlHypothesis
	Sweeps      []htmlSweep
	// Searches is each search row's sentence (record.SearchSentence).
	Searches    [][]seg
	Simulated   string
	Rejudged    string
	Server      []record.ServerFact
	Facts       [][2]string
	Validity    []htmlInvalid
	ValidNotes  []htmlNote
	Ignored     string
	Metadata    string
	SHA256      string
	Matrix      []htmlMatrixRow
	Semantics   []seg
	SemNotes    []string
	ErrorLines  []errorLine
	Repeated    []htmlRepeated
	Ramps       []rampRow // ramped rows, step by step (ramp.go)
	RampIntro   string
	RampHead    []string
	Turns       []htmlTurns // conversation rows by turn
	Baseline    *htmlBaseline
	RowSemNotes [][2]string
	SLO         string
	HasSLO      bool
	Results     []htmlResult
	Pooled      bool // some row calls embeddings or rerank: an Inputs/s column
	Predictions []htmlPrediction
	Telemetry   *htmlTelemetry
	Cost        *htmlCost
	Variants    *htmlVariants
	Diagnosis   *htmlDiagnosis
	Rules       []htmlRule
	RuleResults []htmlRuleResult
	Rejected    []htmlRejected
	SelfCheck   *htmlSelfCheck
	Plots       []htmlPlot
	Reproduce   string
	JudgedBy    string
	ExpFile     string
	HashFile    string
}

type htmlVerdict struct {
	Class    string // pass, fail, incomplete, none
	Headline string
	Detail   []seg
}

type htmlAnswer struct {
	Question, Base string
	Text           []seg
}

type htmlSweep struct {
	Base, OperatingPoint, Knee string
	Rows                       []string
	Why                        []seg
}

type htmlHypothesis struct {
	ID, Statement, Expect, Verdict, Class, Evidence string
}

type htmlMatrixRow struct {
	ID, Question, Load, Input, Output, Stop string
	Verdict, Validity                       htmlBadge
}

// htmlNote is a validity note and the rows it is about.
type htmlNote struct {
	Rows []string
	Text string
}

// htmlInvalid is one failed validity check of one row.
type htmlInvalid struct {
	Row, Check, Why, Fix string
}

type htmlBadge struct {
	Text, Class string
}

type htmlResult struct {
	ID, Status               string
	NotRun, Invalid          bool
	TTFT, TPOT, ITL, E2E     string
	ReqS, OutS, PerUser, Goo string
	Inputs                   string // inputs/s of an embeddings or rerank row (Pooled)
	Errors                   string
	ErrorsBad                bool
}

type htmlPrediction struct {
	Row, Context, Decode, TPOTBound, MeasuredTPOT, TPOTRatio string
	PrefillBound, MeasuredTTFT, TTFTRatio, KV, MaxConc       string
	Regime                                                   string
	Evidence                                                 []seg
}

type htmlRule struct {
	Name, Expect string
}

type htmlRuleResult struct {
	Row, Rule string
	Pass      bool
	// Unjudged says why the rule was not evaluated (its baseline row is
	// missing, invalid or another workload): neither pass nor fail.
	Unjudged string
	Why      [][]seg
}

type htmlRejected struct {
	Row          string
	Why          [][]seg
	PastCapacity bool
}

type htmlSelfCheck struct {
	Shared     bool
	Limit      string
	Rows       []htmlSelfCheckRow
	Mismatched [][2]string
}

type htmlSelfCheckRow struct {
	ID, Rates, Lag, CPU, MErr string
	InFlight, ZeroGaps, Cache string
	In, Out                   htmlBadge
	Client                    htmlBadge
	Notes                     string
}

type htmlPlot struct {
	Name, Title string
	Src         template.URL
}

func newHTMLView(in *Input, plots []charts.Plot) *htmlView {
	p, man, sum, d := in.Plan, in.Manifest, in.Summary, in.Decision
	exp := p.Experiment
	v := &htmlView{
		Title:       "Decision record: " + exp.Name,
		Rejudged:    in.JudgedBy,
		Server:      record.ServerComparison(p, man),
		Name:        exp.Name,
		Description: descriptionSegs(exp.Description),
		Interrupted: sum.Interrupted,
		Verdict:     htmlVerdictOf(d),
		Answer:      htmlAnswerOf(record.AnswerOf(p, sum, d, in.Analysis)),
		Variants:    htmlVariantsOf(record.VariantsOf(p, in.Manifest, sum, d)),
		Facts:       record.RunFacts(man),
		SHA256:      man.Experiment.SHA256,
		Reproduce:   reproduceCommand(man),
		JudgedBy:    in.JudgedBy,
		ExpFile:     man.Experiment.File,
		HashFile:    rundir.HashFile,
		HasSLO:      !sum.SLO.IsZero(),
		SLO:         record.SLOText(sum.SLO),
	}
	if len(exp.Metadata) > 0 {
		v.Metadata = record.FormatMap(exp.Metadata)
	}
	if record.Simulated(man) {
		v.Title += " (" + record.SimulatedTag(man) + ")"
		v.Simulated = record.SimulatedBanner(man)
	}
	for _, rv := range d.Rows {
		if rv.Verdict == verdict.NotRun || rv.Verdict == verdict.Skipped {
			continue
		}
		for _, r := range rv.Validity.Reasons {
			v.Validity = append(v.Validity, htmlInvalid{Row: rv.ID, Check: r.Check, Why: r.Message, Fix: r.Fix})
		}
		v.Ignored = strings.Join(rv.Validity.Ignored, ", ")
	}
	for _, n := range record.GroupedNotes(d) {
		v.ValidNotes = append(v.ValidNotes, htmlNote{Rows: n.Rows, Text: n.Text})
	}
	for _, rs := range sum.Rows {
		if rs.SelfCheck.ClientBound {
			v.ClientBound = append(v.ClientBound, rs.ID)
		}
	}
	for _, h := range d.Hypotheses {
		ev := record.FormatValues(h.Values)
		if h.Reason != "" {
			ev = h.Reason
		}
		v.Hypotheses = append(v.Hypotheses, htmlHypothesis{ID: h.ID, Statement: h.Statement, Expect: h.Expect,
			Verdict: h.Verdict, Class: hypothesisClass(h.Verdict), Evidence: ev})
	}
	if in.Analysis != nil {
		for _, sa := range in.Analysis.Searches {
			v.Searches = append(v.Searches, mdSegs(record.SearchSentence(sa, p.Server.Hardware)))
		}
		for _, sw := range in.Analysis.Sweeps {
			v.Sweeps = append(v.Sweeps, htmlSweep{Base: sw.Base, Rows: sw.Rows, OperatingPoint: sw.OperatingPoint,
				Knee: sw.Knee, Why: mdSegs(sw.Why)})
		}
	}

	for i := range p.Rows {
		r := &p.Rows[i]
		inTok := inputText(p, r)
		if r.Prefix != nil {
			inTok += fmt.Sprintf(" (%d shared prefix, %d distinct%s)", r.Prefix.Length, r.Prefix.Distinct, map[bool]string{true: ", warm"}[r.Prefix.Warm])
		}
		inTok += conversationText(r)
		rv := d.Row(r.ID)
		verdict := record.MatrixVerdict(rv, sum.Row(r.ID))
		v.Matrix = append(v.Matrix, htmlMatrixRow{ID: r.ID, Question: r.Question, Load: loadText(r),
			Input: inTok, Output: r.Output.String(), Stop: r.Stop(), Verdict: verdictBadge(verdict), Validity: validityBadge(rv)})
	}
	for _, id := range p.Skipped {
		v.Matrix = append(v.Matrix, htmlMatrixRow{ID: id, Verdict: verdictBadge(verdict.Skipped), Validity: htmlBadge{"—", ""}})
	}

	v.Semantics = semanticsSegs(sum.Semantics)
	v.SemNotes = append(v.SemNotes, sum.SemanticsNotes...)
	v.ErrorLines = errorLines(sum)
	v.Repeated = htmlRepeatedOf(sum)
	v.Ramps, v.RampIntro, v.RampHead = rampRowsOf(sum, d), rampIntro, rampHead
	v.Turns = htmlTurnsOf(sum)
	v.Baseline = newHTMLBaseline(d.Baseline)
	for _, rs := range sum.Rows {
		if len(rs.SemanticsNotes) > 0 {
			v.RowSemNotes = append(v.RowSemNotes, [2]string{rs.ID, strings.Join(rs.SemanticsNotes, "; ")})
		}
	}
	v.Pooled = anyPooled(p)
	for i := range sum.Rows {
		res := htmlResultOf(&sum.Rows[i], v.HasSLO)
		if rv := d.Row(sum.Rows[i].ID); rv != nil && !rv.Validity.Valid && !res.NotRun {
			res.Invalid = true
		}
		res.ITL = itlCell(&sum.Rows[i], p.Validity)
		res.OutS, res.PerUser, res.Inputs = throughputCells(p, &sum.Rows[i])
		v.Results = append(v.Results, res)
	}
	if in.Analysis != nil {
		for _, pr := range in.Analysis.Predictions {
			v.Predictions = append(v.Predictions, htmlPredictionOf(pr))
		}
	}

	for _, a := range p.Acceptance {
		v.Rules = append(v.Rules, htmlRule{Name: a.Name, Expect: a.Program.Source})
	}
	for _, rv := range d.Rows {
		var why [][]seg
		for _, rr := range rv.Rules {
			res := htmlRuleResult{Row: rv.ID, Rule: rr.Rule, Pass: rr.Pass, Unjudged: rr.Unjudged}
			if !rr.Pass && rr.Unjudged == "" {
				res.Why = failureSegs(rr)
				why = append(why, append([]seg{prose(rr.Rule + ": ")}, flatten(res.Why)...))
			}
			v.RuleResults = append(v.RuleResults, res)
		}
		if rv.Verdict == verdict.Fail || rv.Verdict == verdict.Rejected {
			v.Rejected = append(v.Rejected, htmlRejected{Row: rv.ID, Why: why, PastCapacity: rv.Verdict == verdict.Rejected})
		}
	}
	v.SelfCheck = htmlSelfCheckOf(sum)
	v.Telemetry = htmlTelemetryOf(sum)
	v.Cost = htmlCostOf(sum, d)
	v.Diagnosis = htmlDiagnosisOf(record.Diagnosis(in.Plan, in.Summary, in.Analysis, d))
	for _, pl := range plots {
		var src string
		switch {
		case len(pl.SVG) > 0:
			src = "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(pl.SVG)
		case len(pl.PNG) > 0:
			src = "data:image/png;base64," + base64.StdEncoding.EncodeToString(pl.PNG)
		default:
			continue
		}
		title := pl.Title
		if title == "" {
			title = pl.Name
		}
		// Our own bytes, base64-encoded: nothing in them can leave the
		// attribute, so the URL is marked safe for html/template, which
		// would otherwise refuse a data: URL.
		v.Plots = append(v.Plots, htmlPlot{Name: pl.Name, Title: title, Src: template.URL(src)})
	}
	return v
}

func htmlAnswerOf(a *record.Answer) []htmlAnswer {
	var out []htmlAnswer
	for _, l := range a.Lines {
		out = append(out, htmlAnswer{Question: l.Question, Base: l.Base, Text: mdSegs(l.Text)})
	}
	for _, e := range a.Extra {
		out = append(out, htmlAnswer{Text: mdSegs(e)})
	}
	return out
}

func htmlVerdictOf(d *verdict.Decision) htmlVerdict {
	headline, class := record.VerdictHeadline(d)
	return htmlVerdict{Class: class, Headline: headline, Detail: mdSegs(record.VerdictDetail(d))}
}

func hypothesisClass(v string) string {
	switch v {
	case verdict.Supported:
		return "pass"
	case verdict.Refuted:
		return "fail"
	}
	return "incomplete"
}

func verdictBadge(v string) htmlBadge {
	switch v {
	case verdict.Pass:
		return htmlBadge{"✓ pass", "pass"}
	case verdict.Fail:
		return htmlBadge{"✗ fail", "fail"}
	case verdict.NotRun, verdict.Invalid, verdict.Skipped:
		return htmlBadge{v, "incomplete"}
	case verdict.Rejected:
		return htmlBadge{"rejected (past capacity)", "none"}
	case record.FailedNotJudged:
		return htmlBadge{v, "fail"}
	case "":
		return htmlBadge{"—", ""}
	}
	return htmlBadge{v, "none"}
}

// validityBadge is a row's validity for the matrix.
func validityBadge(rv *verdict.RowVerdict) htmlBadge {
	t := record.ValidityText(rv)
	switch {
	case t == "—":
		return htmlBadge{t, ""}
	case rv.Validity.Valid:
		return htmlBadge{"✓ valid", "pass"}
	}
	return htmlBadge{t, "incomplete"}
}

func semanticsSegs(sem string) []seg {
	switch sem {
	case metrics.SemVLLM:
		return []seg{prose("semantics "), mono("vllm"), prose(": as "), mono("vllm bench serve"), prose(" defines them")}
	case metrics.SemAIPerf:
		return []seg{prose("semantics "), mono("aiperf"), prose(": as NVIDIA AIPerf defines them with its default options")}
	}
	return []seg{prose("semantics "), mono("infermatrix")}
}

func htmlResultOf(rs *metrics.RowSummary, hasSLO bool) htmlResult {
	if rs.Status == metrics.RowNotRun {
		return htmlResult{ID: rs.ID, Status: "not run", NotRun: true}
	}
	mt := rs.Metrics
	status := fmt.Sprintf("%d / %d", rs.Requests.Completed, rs.Requests.Sent)
	if rs.Status == metrics.RowInterrupted {
		status += " (interrupted)"
	}
	if rs.Status == metrics.RowFailed {
		status += " (failed: " + rs.Error + ")"
	}
	goodput := "—"
	if hasSLO {
		goodput = fmt.Sprintf("%.1f%% (%s req/s)", 100*rs.Goodput.Ratio, numfmt.Num(rs.Goodput.RequestsPerS))
	}
	return htmlResult{ID: rs.ID, Status: status,
		TTFT: triple(mt.TTFT), TPOT: triple(mt.TPOT), ITL: triple(mt.ITL), E2E: triple(mt.E2E),
		ReqS: numfmt.Num(rs.Throughput.RequestsPerS), OutS: numfmt.Num(rs.Throughput.OutputTokensPerS),
		PerUser: numfmt.Num(rs.Throughput.OutputTokensPerSU), Goo: goodput,
		Errors: errorsCell(rs), ErrorsBad: rs.Errors.Total > 0}
}

func htmlPredictionOf(p analysis.RowPrediction) htmlPrediction {
	opt := func(v float64) string {
		if v == 0 {
			return "—"
		}
		return numfmt.Num(v)
	}
	ratio := func(v float64) string {
		if v == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", v)
	}
	return htmlPrediction{Row: p.Row, Context: numfmt.Num(p.Context), Decode: numfmt.Num(p.DecodeTokensPerS),
		TPOTBound: numfmt.Num(p.TPOTBoundMS), MeasuredTPOT: opt(p.MeasuredTPOTMS), TPOTRatio: ratio(p.TPOTRatio),
		PrefillBound: numfmt.Num(p.PrefillBoundMS), MeasuredTTFT: opt(p.MeasuredTTFTMS), TTFTRatio: ratio(p.TTFTRatio),
		KV: fmt.Sprint(p.KVCapacityTokens), MaxConc: fmt.Sprint(p.MaxConcurrency),
		Regime: p.Regime, Evidence: mdSegs(p.Evidence)}
}

// failureSegs says why a rule failed: each failed clause as code, with the
// measured values it read or the reason it could not be judged.
func failureSegs(rr verdict.RuleResult) [][]seg {
	if rr.Reason != "" {
		return [][]seg{{prose(rr.Reason)}}
	}
	var out [][]seg
	for _, c := range rr.Failed {
		s := []seg{mono(c.Text)}
		switch {
		case c.Reason != "":
			s = append(s, prose(" ("+c.Reason+")"))
		case len(c.Values) > 0:
			s = append(s, prose(" with "+record.FormatValues(c.Values)))
		}
		out = append(out, s)
	}
	return out
}

// flatten joins clauses with semicolons, for one line.
func flatten(parts [][]seg) []seg {
	var out []seg
	for i, p := range parts {
		if i > 0 {
			out = append(out, prose("; "))
		}
		out = append(out, p...)
	}
	return out
}

func htmlSelfCheckOf(sum *metrics.Summary) *htmlSelfCheck {
	sc := &htmlSelfCheck{Limit: fmt.Sprintf("%g", 100*metrics.TokenMismatchLimit)}
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		c := rs.SelfCheck
		sc.Shared = sc.Shared || c.SharedWithServer
		if !(c.RequestedRate > 0 || c.Cores > 0 || c.MeasurementErrorMS > 0 || c.ClientBound ||
			rs.Tokens.Input.Requests+rs.Tokens.Output.Requests > 0 || rs.InFlight.Max > 0) {
			continue
		}
		row := htmlSelfCheckRow{ID: rs.ID, Rates: "—", Lag: "—", CPU: "—", MErr: "—", InFlight: "—", ZeroGaps: "—", Cache: cacheCell(rs.Cache),
			In: lengthBadge(rs.Tokens.Input), Out: lengthBadge(rs.Tokens.Output), Client: htmlBadge{"ok", "pass"}}
		if c.RequestedRate > 0 {
			row.Rates = numfmt.Num(c.RequestedRate) + " / " + numfmt.Num(c.ScheduledRate) + " / " + numfmt.Num(c.AchievedRate)
		}
		if c.DispatchLag.Count > 0 {
			row.Lag = numfmt.Num(c.DispatchLag.P50) + " / " + numfmt.Num(c.DispatchLag.P99)
		}
		if c.Cores > 0 {
			row.CPU = fmt.Sprintf("%.0f%% of %d cores", 100*c.ClientCPU, c.Cores)
			if c.HostCPU > 0 {
				row.CPU += fmt.Sprintf(" (machine %.0f%%)", 100*c.HostCPU)
			}
		}
		if c.MeasurementErrorMS > 0 || c.TimerLatenessP99MS > 0 {
			row.MErr = optNum(c.TimerLatenessP99MS) + " / " + optNum(c.MeasurementErrorMS)
		}
		if rs.InFlight.Max > 0 {
			row.InFlight = numfmt.Num(rs.InFlight.Mean) + " / " + numfmt.Num(float64(rs.InFlight.Max))
		}
		if c.Gaps > 0 {
			row.ZeroGaps = fmt.Sprintf("%.1f%%", 100*c.ZeroGapShare)
		}
		if c.ClientBound {
			row.Client = htmlBadge{"client-bound", "fail"}
		}
		row.Notes = strings.Join(c.Notes, "; ")
		if rs.Tokens.Mismatch {
			sc.Mismatched = append(sc.Mismatched, [2]string{rs.ID, strings.Join(rs.Tokens.Notes, "; ")})
		}
		sc.Rows = append(sc.Rows, row)
	}
	if len(sc.Rows) == 0 {
		return nil
	}
	return sc
}

func lengthBadge(l metrics.LengthCheck) htmlBadge {
	if l.Requests == 0 {
		return htmlBadge{"—", ""}
	}
	s := fmt.Sprintf("%+.1f%%", 100*l.Diff)
	if l.Mismatch {
		return htmlBadge{s + " mismatch", "fail"}
	}
	return htmlBadge{s, ""}
}

var htmlPage = template.Must(template.New("report").Parse(htmlTemplate))

// htmlTemplate is the page. Its sections follow decision.md's order, with
// its headings.
const htmlTemplate = `{{define "segs"}}{{range .}}{{if .Code}}<code>{{.Text}}</code>{{else}}{{.Text}}{{end}}{{end}}{{end -}}
<!DOCTYPE html>
<html lang="en">
<head>
` + htmlstyle.Meta + `<meta name="generator" content="infermatrix">
<title>{{.Title}}</title>
<style>
` + htmlstyle.CSS + `</style>
</head>
<body>
<header>
<h1>{{.Title}}</h1>
{{if .Simulated}}<p class="callout simulated"><strong>{{.Simulated}}</strong></p>{{end}}
{{if .Rejudged}}<p class="callout"><strong>Re-judged.</strong> {{.Rejudged}}</p>{{end}}
<section id="verdict">
{{if .Interrupted}}<p class="callout"><strong>Interrupted.</strong> The run was stopped before it finished; the numbers below cover only what was measured.</p>{{end}}
<div class="verdict {{.Verdict.Class}}" role="status"><strong>Verdict: {{.Verdict.Headline}}</strong> {{template "segs" .Verdict.Detail}}</div>
{{if .Answer}}<ul class="answer">
{{- range .Answer}}
<li>{{if .Question}}<em>{{.Question}}</em> {{else if .Base}}<code>{{.Base}}</code>: {{end}}{{template "segs" .Text}}</li>
{{- end}}
</ul>{{end}}
{{if .ClientBound}}<p class="callout"><strong>Client-bound rows:</strong> {{range $i, $id := .ClientBound}}{{if $i}}, {{end}}<code>{{$id}}</code>{{end}}. The client fell behind the load it was asked to offer, or its CPU was saturated, so these rows may measure the client rather than the server; see <a href="#client-self-check">Client self-check</a>.</p>{{end}}
</section>
{{range .Description}}<p class="lead">{{template "segs" .}}</p>{{end}}
<nav class="toc" aria-label="Sections">
<a href="#verdict">Verdict</a>
{{- if .Hypotheses}}
<a href="#hypotheses">Hypotheses</a>
{{- end}}
{{- if .Searches}}
<a href="#searches">Searches</a>
{{- end}}
{{- if .Variants}}
<a href="#variants">Variants</a>
{{- end}}
{{- if .Sweeps}}
<a href="#operating-point">Operating point</a>
{{- end}}
{{- if or .Validity .ValidNotes}}
<a href="#validity">Validity</a>
{{- end}}
<a href="#server-and-run">Server and run</a>
<a href="#workload-matrix">Workload matrix</a>
<a href="#results">Results</a>
{{- if .Telemetry}}
<a href="#server-and-gpu">Server and GPU</a>
{{- end}}
{{- if .Cost}}
<a href="#cost">Cost</a>
{{- end}}
{{- if .Predictions}}
<a href="#predictions">Prediction against measurement</a>
{{- end}}
{{- if .Rules}}
<a href="#acceptance">Acceptance</a>
{{- end}}
{{- if .Rejected}}
<a href="#rejected-rows">Rejected rows</a>
{{- end}}
<a href="#diagnosis">Diagnosis</a>
{{- if .SelfCheck}}
<a href="#client-self-check">Client self-check</a>
{{- end}}
{{- if .Plots}}
<a href="#plots">Plots</a>
{{- end}}
<a href="#reproduce">Reproduce</a>
</nav>
</header>
<main>
{{if .Hypotheses}}
<section id="hypotheses">
<h2>Hypotheses</h2>
<div class="scroll"><table>
<thead><tr><th></th><th>Hypothesis</th><th>Verdict</th><th>Evidence</th></tr></thead>
<tbody>
{{- range .Hypotheses}}
<tr><td class="id">{{.ID}}</td><td>{{.Statement}}<br><code>{{.Expect}}</code></td><td><span class="badge {{.Class}}">{{.Verdict}}</span></td><td>{{.Evidence}}</td></tr>
{{- end}}
</tbody>
</table></div>
</section>
{{end}}
{{if .Searches}}
<section id="searches">
<h2>Searches</h2>
<ul>
{{- range .Searches}}
<li>{{template "segs" .}}</li>
{{- end}}
</ul>
</section>
{{end}}
` + htmlVariantsTemplate + `
{{if .Sweeps}}
<section id="operating-point">
<h2>Operating point</h2>
<p>For each sweep, the operating point is the highest-throughput valid row that passes acceptance, and the knee the row after which output throughput gains flatten while latency climbs; rows that are not valid place neither.</p>
<div class="scroll"><table>
<thead><tr><th>Sweep</th><th>Rows</th><th>Operating point</th><th>Knee</th><th>Why</th></tr></thead>
<tbody>
{{- range .Sweeps}}
<tr><td class="id"><code>{{.Base}}</code></td><td>{{range $i, $r := .Rows}}{{if $i}}, {{end}}<code>{{$r}}</code>{{end}}</td><td class="id">{{if .OperatingPoint}}<span class="badge pass">{{.OperatingPoint}}</span>{{else}}<span class="badge none">none</span>{{end}}</td><td class="id">{{if .Knee}}<code>{{.Knee}}</code>{{else}}—{{end}}</td><td>{{template "segs" .Why}}</td></tr>
{{- end}}
</tbody>
</table></div>
</section>
{{end}}
{{if or .Validity .ValidNotes}}
<section id="validity">
<h2>Validity</h2>
{{if .Validity}}
<p>A row is valid when its figures mean what they say (docs/validity.md). These rows are not, and are not judged:</p>
<div class="scroll"><table>
<thead><tr><th>Row</th><th>Check</th><th>Why</th><th>What to do</th></tr></thead>
<tbody>
{{- range .Validity}}
<tr><td class="id"><code>{{.Row}}</code></td><td>{{.Check}}</td><td>{{.Why}}</td><td>{{.Fix}}</td></tr>
{{- end}}
</tbody>
</table></div>
{{end}}
{{if .ValidNotes}}
<p>Notes:</p>
<ul>
{{- range .ValidNotes}}
<li>{{range $i, $r := .Rows}}{{if $i}}, {{end}}<code>{{$r}}</code>{{end}}: {{.Text}}.</li>
{{- end}}
</ul>
{{end}}
{{if .Ignored}}<p>Checks switched off by the experiment: {{.Ignored}}.</p>{{end}}
</section>
{{end}}
<section id="server-and-run">
<h2>Server and run</h2>
<p>What the experiment declared, beside what the run found.</p>
<div class="scroll"><table>
<thead><tr><th></th><th>Declared</th><th>Discovered</th><th></th></tr></thead>
<tbody>
{{- range .Server}}
<tr><th scope="row">{{.Name}}</th><td>{{.Declared}}</td><td>{{.Discovered}}</td><td>{{if .Mismatch}}<span class="badge fail">⚠ {{.Mismatch}}</span>{{end}}</td></tr>
{{- end}}
</tbody>
</table></div>
<div class="scroll"><table class="facts">
<tbody>
{{- range .Facts}}
<tr><th scope="row">{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{- end}}
{{- if .SHA256}}
<tr><th scope="row">Experiment sha256</th><td><code>{{.SHA256}}</code></td></tr>
{{- end}}
{{- if .Metadata}}
<tr><th scope="row">Metadata</th><td>{{.Metadata}}</td></tr>
{{- end}}
</tbody>
</table></div>
</section>
<section id="workload-matrix">
<h2>Workload matrix</h2>
<div class="scroll"><table>
<thead><tr><th>Row</th><th>Question</th><th>Load</th><th>Input tokens</th><th>Output tokens</th><th>Stop</th><th>Verdict</th><th>Validity</th></tr></thead>
<tbody>
{{- range .Matrix}}
<tr><td class="id"><code>{{.ID}}</code></td><td>{{.Question}}</td><td>{{.Load}}</td><td>{{.Input}}</td><td>{{.Output}}</td><td>{{.Stop}}</td><td>{{if .Verdict.Class}}<span class="badge {{.Verdict.Class}}">{{.Verdict.Text}}</span>{{else}}{{.Verdict.Text}}{{end}}</td><td>{{if .Validity.Class}}<span class="badge {{.Validity.Class}}">{{.Validity.Text}}</span>{{else}}{{.Validity.Text}}{{end}}</td></tr>
{{- end}}
</tbody>
</table></div>
</section>
<section id="results">
<h2>Results</h2>
<p>Latencies in ms, as p50 / p95 / p99 over successful measured requests; throughput over each row's measured window. Definitions: docs/metrics.md, {{template "segs" .Semantics}}.</p>
<div class="scroll"><table>
<thead><tr><th>Row</th><th>OK / sent</th><th class="num">TTFT</th><th class="num">TPOT</th><th class="num">ITL</th><th class="num">E2E</th><th class="num">Req/s</th>{{if .Pooled}}<th class="num">Inputs/s</th>{{end}}<th class="num">Output tok/s</th><th class="num">Tok/s per user</th><th class="num">Goodput</th><th>Errors</th></tr></thead>
<tbody>
{{- range .Results}}
{{- if .NotRun}}
<tr><td class="id"><code>{{.ID}}</code></td><td colspan="{{if $.Pooled}}11{{else}}10{{end}}"><span class="badge incomplete">not run</span></td></tr>
{{- else}}
<tr><td class="id"><code>{{.ID}}</code></td><td>{{.Status}}{{if .Invalid}} <span class="badge incomplete">invalid</span>{{end}}</td><td class="num">{{.TTFT}}</td><td class="num">{{.TPOT}}</td><td class="num">{{.ITL}}</td><td class="num">{{.E2E}}</td><td class="num">{{.ReqS}}</td>{{if $.Pooled}}<td class="num">{{.Inputs}}</td>{{end}}<td class="num">{{.OutS}}</td><td class="num">{{.PerUser}}</td><td class="num">{{.Goo}}</td><td>{{if .ErrorsBad}}<span class="bad">{{.Errors}}</span>{{else}}{{.Errors}}{{end}}</td></tr>
{{- end}}
{{- end}}
</tbody>
</table></div>
{{if .HasSLO}}<p>Goodput counts requests meeting every SLO: {{.SLO}}.</p>{{end}}
{{if .ErrorLines}}
<p>Errors, with the first message of each class (every message is in the row's requests.jsonl):</p>
<div class="scroll"><table>
<thead><tr><th>Row</th><th>Class</th><th class="num">Requests</th><th>First message</th></tr></thead>
<tbody>
{{- range .ErrorLines}}
<tr><td class="id"><code>{{.Row}}</code></td><td>{{.Class}}</td><td class="num">{{.Count}}</td><td>{{.Message}}</td></tr>
{{- end}}
</tbody>
</table></div>
{{end}}
{{if .Repeated}}
<h3>Repeated rows</h3>
<p>Each figure pools every trial's measured requests; the interval in brackets is for the figure's mean over trials (Student's t over the trials' own values), where another run of the same row would land on average, assuming the trials are independent.</p>
{{- range .Repeated}}
<h4><code>{{.ID}}</code> ({{.Trials}} trials, {{.Level}} intervals)</h4>
<ul>
{{- range .Figures}}
<li>{{index . 0}} {{index . 1}}</li>
{{- end}}
</ul>
<div class="scroll"><table>
<thead><tr><th class="num">Trial</th><th>OK / sent</th><th>TTFT p50 / p95 / p99 ms</th><th>TPOT p50 / p95 / p99 ms</th><th>ITL p50 / p95 / p99 ms</th><th>E2E p50 / p95 / p99 ms</th><th class="num">req/s</th><th class="num">out tok/s</th><th>Errors</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr>{{range $i, $c := .}}<td{{if eq $i 0}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{end}}
{{if .Ramps}}
<h3>Ramps</h3>
<p>{{.RampIntro}}</p>
{{- $head := .RampHead}}
{{- range .Ramps}}
<h4><code>{{.ID}}</code></h4>
{{if .Segs}}<p>{{template "segs" .Segs}}.</p>{{end}}
<div class="scroll"><table>
<thead><tr>{{range $head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{end}}
{{if .Turns}}
<h3>Conversations by turn</h3>
{{with index .Turns 0}}<p>{{.Intro}}</p>{{end}}
{{- range .Turns}}
<h4><code>{{.ID}}</code></h4>
<div class="scroll"><table>
<thead><tr>{{range $i, $h := .Header}}<th{{if or (eq $i 0) (eq $i 1)}} class="num"{{end}}>{{$h}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr>{{range $i, $c := .}}<td{{if or (eq $i 0) (eq $i 1)}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
{{end}}
{{if or .SemNotes .RowSemNotes}}
<p>Under this semantics:</p>
<ul>
{{- range .SemNotes}}
<li>{{.}}.</li>
{{- end}}
{{- range .RowSemNotes}}
<li><code>{{index . 0}}</code>: {{index . 1}}.</li>
{{- end}}
</ul>
{{end}}
</section>
{{with .Baseline}}
<section id="baseline">
<h2>Baseline</h2>
<p>{{template "segs" .Intro}}</p>
<div class="scroll"><table>
<thead><tr><th>Row</th>{{range .Heads}}<th class="num">{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Lines}}
<tr><td class="id"><code>{{.Row}}</code></td>{{if .Unusable}}<td colspan="6"><span class="badge incomplete">no baseline</span> {{.Unusable}}</td>{{else}}{{range .Cells}}<td class="num">{{.}}</td>{{end}}{{end}}</tr>
{{- end}}
</tbody>
</table></div>
</section>
{{end}}
{{with .Telemetry}}
<section id="server-and-gpu">
<h2>Server and GPU</h2>
<p>{{.Intro}}</p>
<div class="scroll"><table>
<thead><tr><th>Row</th><th>Scrapes</th><th class="num">KV cache use</th><th class="num">Running</th><th class="num">Waiting</th><th class="num">Prefix-cache hits</th><th class="num">Preemptions</th><th class="num">Server TTFT</th><th class="num">TTFT gap</th><th class="num">Server TPOT</th><th class="num">TPOT gap</th><th class="num">GPU utilization</th><th class="num">GPU power (W)</th><th class="num">GPU memory (GB)</th><th>Token counters</th></tr></thead>
<tbody>
{{- range .Lines}}
{{- if .None}}
<tr><td class="id"><code>{{.Row}}</code></td><td colspan="14"><span class="badge none">no telemetry</span></td></tr>
{{- else}}
<tr><td class="id"><code>{{.Row}}</code></td><td>{{.Scrapes}}</td><td class="num">{{.KV}}</td><td class="num">{{.Running}}</td><td class="num">{{.Waiting}}</td><td class="num">{{.PrefixHits}}</td><td class="num">{{if .PreemptedBad}}<span class="bad">{{.Preemptions}}</span>{{else}}{{.Preemptions}}{{end}}</td><td class="num">{{.ServerTTFT}}</td><td class="num">{{.TTFTGap}}</td><td class="num">{{.ServerTPOT}}</td><td class="num">{{.TPOTGap}}</td><td class="num">{{.GPUUtil}}</td><td class="num">{{.Power}}</td><td class="num">{{.Memory}}</td><td>{{if .TokensBad}}<span class="badge fail">{{.Tokens}}</span>{{else}}{{.Tokens}}{{end}}</td></tr>
{{- end}}
{{- end}}
</tbody>
</table></div>
{{if .Notes}}
<p>Telemetry notes:</p>
<ul>
{{- range .Notes}}
<li><code>{{.Row}}</code>: {{.Text}}.</li>
{{- end}}
</ul>
{{end}}
</section>
{{end}}
{{- with .Cost}}
<section id="cost">
<h2>Cost</h2>
<p>{{.Intro}}</p>
<div class="scroll"><table>
<thead><tr><th>Row</th><th class="num">Price per hour</th><th class="num">$ per M output tokens</th><th class="num">$ per M total tokens</th><th class="num">Output tokens per $</th><th class="num">Output tok/s per GPU</th></tr></thead>
<tbody>
{{- range .Lines}}
<tr><td class="id"><code>{{.Row}}</code></td><td class="num">{{.USDPerHour}}</td><td class="num">{{.PerMOutput}}</td><td class="num">{{.PerMTotal}}</td><td class="num">{{.OutputPerUSD}}</td><td class="num">{{.OutputPerSPerGPU}}</td></tr>
{{- end}}
</tbody>
</table></div>
<p>{{template "segs" .Ranking}}</p>
</section>
{{end}}
{{if .Predictions}}
<section id="predictions">
<h2>Prediction against measurement</h2>
<p>Lower bounds from the roofline (docs/predictions.md): TPOT at batch one, bandwidth-bound; prefill compute-bound. Measured values are p50; times in ms.</p>
<div class="scroll"><table>
<thead><tr><th>Row</th><th class="num">Context</th><th class="num">Decode tok/s per stream</th><th class="num">TPOT bound</th><th class="num">TPOT measured</th><th class="num">×bound</th><th class="num">Prefill bound</th><th class="num">TTFT measured</th><th class="num">×bound</th><th class="num">KV capacity</th><th class="num">Max concurrency</th><th>Regime</th><th>Evidence</th></tr></thead>
<tbody>
{{- range .Predictions}}
<tr><td class="id"><code>{{.Row}}</code></td><td class="num">{{.Context}}</td><td class="num">{{.Decode}}</td><td class="num">{{.TPOTBound}}</td><td class="num">{{.MeasuredTPOT}}</td><td class="num">{{.TPOTRatio}}</td><td class="num">{{.PrefillBound}}</td><td class="num">{{.MeasuredTTFT}}</td><td class="num">{{.TTFTRatio}}</td><td class="num">{{.KV}}</td><td class="num">{{.MaxConc}}</td><td>{{.Regime}}</td><td>{{template "segs" .Evidence}}</td></tr>
{{- end}}
</tbody>
</table></div>
</section>
{{end}}
{{if .Rules}}
<section id="acceptance">
<h2>Acceptance</h2>
<ul>
{{- range .Rules}}
<li><strong>{{.Name}}</strong>: <code>{{.Expect}}</code></li>
{{- end}}
</ul>
{{if .RuleResults}}
<div class="scroll"><table>
<thead><tr><th>Row</th><th>Rule</th><th>Result</th></tr></thead>
<tbody>
{{- range .RuleResults}}
<tr><td class="id"><code>{{.Row}}</code></td><td>{{.Rule}}</td><td>{{if .Pass}}<span class="badge pass">✓ pass</span>{{else if .Unjudged}}<span class="badge none">not judged</span> {{.Unjudged}}{{else}}<span class="badge fail">✗ fail</span> {{range $i, $c := .Why}}{{if $i}}; {{end}}{{template "segs" $c}}{{end}}{{end}}</td></tr>
{{- end}}
</tbody>
</table></div>
{{end}}
</section>
{{end}}
{{if .Rejected}}
<section id="rejected-rows">
<h2>Rejected rows</h2>
<ul>
{{- range .Rejected}}
<li><code>{{.Row}}</code>{{if .PastCapacity}} (past the operating point: it does not fail the run){{end}}: {{range $i, $c := .Why}}{{if $i}}; {{end}}{{template "segs" $c}}{{end}}</li>
{{- end}}
</ul>
</section>
{{end}}
{{with .Diagnosis}}
<section id="diagnosis">
<h2>Diagnosis</h2>
<p>{{.Intro}}</p>
{{if .Findings}}
<ul class="findings">
{{- range .Findings}}
<li><strong><code>{{.Row}}</code>: {{.Regime}}</strong> <span class="badge {{.Severity.Class}}">{{.Severity.Text}}</span> {{template "segs" .Symptom}}
<ul>
<li>Evidence: {{range $i, $e := .Evidence}}{{if $i}}; {{end}}{{template "segs" $e}}{{end}}.</li>
<li>Next: {{template "segs" .Next}}</li>
</ul></li>
{{- end}}
</ul>
{{end}}
{{range .Scope}}<p>{{template "segs" .}}</p>{{end}}
</section>
{{end}}
{{with .SelfCheck}}
<section id="client-self-check">
<h2>Client self-check</h2>
<p>Whether the client measured the server rather than itself, and what load the server saw. For open-loop rows: the rate asked for, the rate of the arrival schedule drawn for this run, the rate requests actually left the client at, and how late they left (queue time behind a concurrency cap excluded). For every row: requests in flight (time-weighted mean over the measured window, and the most at once); the client process's CPU use as a share of its cores; how late its probe timers fired (p99) and the estimated lateness of its timestamps (clock resolution plus p99 scheduling delay; docs/metrics.md says what it leaves out); the share of token events read together with the one before; the share of prompt tokens the server served from its prefix cache, and of those the row did not share on purpose. Then the server's token counts against the requested lengths, as the mean relative difference; beyond ±{{.Limit}}% the row measured another workload than it says.</p>
{{if .Shared}}<p>The built-in server runs in the client's process: its CPU use and scheduling delay count too.</p>{{end}}
<div class="scroll"><table>
<thead><tr><th>Row</th><th class="num">Requested / scheduled / achieved req/s</th><th class="num">Dispatch lag p50 / p99 (ms)</th><th class="num">In flight mean / max</th><th>Client CPU</th><th class="num">Timer lateness p99 / measurement error (ms)</th><th class="num">Zero gaps</th><th class="num">Cache hits (unasked)</th><th class="num">Input tokens vs requested</th><th class="num">Output tokens vs requested</th><th>Client</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr><td class="id"><code>{{.ID}}</code></td><td class="num">{{.Rates}}</td><td class="num">{{.Lag}}</td><td class="num">{{.InFlight}}</td><td>{{.CPU}}</td><td class="num">{{.MErr}}</td><td class="num">{{.ZeroGaps}}</td><td class="num">{{.Cache}}</td><td class="num">{{if .In.Class}}<span class="badge {{.In.Class}}">{{.In.Text}}</span>{{else}}{{.In.Text}}{{end}}</td><td class="num">{{if .Out.Class}}<span class="badge {{.Out.Class}}">{{.Out.Text}}</span>{{else}}{{.Out.Text}}{{end}}</td><td><span class="badge {{.Client.Class}}">{{.Client.Text}}</span>{{if .Notes}} {{.Notes}}{{end}}</td></tr>
{{- end}}
</tbody>
</table></div>
{{if .Mismatched}}
<p><strong>Token lengths differ from the requested ones:</strong></p>
<ul>
{{- range .Mismatched}}
<li><code>{{index . 0}}</code>: {{index . 1}}.</li>
{{- end}}
</ul>
{{end}}
</section>
{{end}}
{{if .Plots}}
<section id="plots">
<h2>Plots</h2>
{{- range .Plots}}
<figure id="plot-{{.Name}}">
<img src="{{.Src}}" alt="{{.Title}}">
<figcaption>{{.Title}}</figcaption>
</figure>
{{- end}}
</section>
{{end}}
<section id="reproduce">
<h2>Reproduce</h2>
<pre><code>{{.Reproduce}}</code></pre>
<p>Experiment <code>{{.ExpFile}}</code>, sha256 <code>{{.SHA256}}</code> (check with <code>sha256sum -c {{.HashFile}}</code> in the run directory).</p>
</section>
</main>
<footer>Written by infermatrix from the run directory's records; decision.md holds the same record.</footer>
</body>
</html>
`
