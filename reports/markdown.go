package reports

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/record"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/charts"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// Input is everything a decision record is rendered from.
type Input struct {
	Plan     *schema.Plan
	Manifest *rundir.Manifest
	Summary  *metrics.Summary
	Decision *verdict.Decision
	// Analysis is derived from the above by Analyze; Write fills it in.
	Analysis *analysis.Analysis
	// Records calls fn for each per-request record of a row, in file
	// order, for renderers that show raw requests (the spreadsheet, the
	// CDF plots). It streams: a million-request row is never in memory
	// at once. Nil when the records are not at hand.
	Records func(rowID string, fn func(*metrics.Record) error) error
	// RunDir is the run directory's path, for the reproduce section.
	RunDir string
	// JudgedBy names the experiment file (and its hash) whose acceptance
	// rules and hypotheses judged the run, when it is not the one the run
	// was made with (infermatrix report --experiment).
	JudgedBy string
	// Baseline is the run the rules' baseline.<metric> read (run
	// --baseline, the experiment's baseline key, or for report the one the
	// manifest recorded); nil for none.
	Baseline *verdict.Baseline

	plots []charts.Plot // rendered by Write, linked from decision.md
}

// WriteMarkdown renders decision.md: GitHub-flavoured Markdown for a pull
// request, in the order a reviewer reads: the question and verdict first,
// then what was run on what, the numbers, why rows were rejected, and how
// to reproduce it.
func WriteMarkdown(w io.Writer, in *Input) error {
	m := &mdWriter{w: w}
	p, man, sum, d := in.Plan, in.Manifest, in.Summary, in.Decision
	exp := p.Experiment

	title := "Decision record: " + exp.Name
	if record.Simulated(man) {
		title += " (" + record.SimulatedTag(man) + ")"
	}
	m.printf("# %s\n\n", cell(title))
	if record.Simulated(man) {
		m.printf("> **%s**\n\n", cell(record.SimulatedBanner(man)))
	}
	if in.JudgedBy != "" {
		m.printf("> **Re-judged.** %s\n\n", cell(in.JudgedBy))
	}
	// The answer comes first: a reviewer who reads one paragraph has
	// read the decision; everything below is its evidence.
	m.verdict(d, sum)
	vars := record.VariantsOf(p, man, sum, d)
	m.answer(record.AnswerOf(p, sum, d, in.Analysis))
	// The description is the experiment's own prose, shown as text:
	// its paragraphs stay, its markup does not (docs/experiment-format.md).
	if d := textsafe.Markdown(exp.Description); d != "" {
		m.printf("%s\n\n", d)
	}
	if len(d.Hypotheses) > 0 {
		m.printf("## Hypotheses\n\n")
		m.printf("| | Hypothesis | Verdict | Evidence |\n|---|---|---|---|\n")
		for _, h := range d.Hypotheses {
			ev := record.FormatValues(h.Values)
			if h.Reason != "" {
				ev = h.Reason
			}
			m.printf("| %s | %s<br>%s | **%s** | %s |\n", cell(h.ID), cell(h.Statement), code(h.Expect), h.Verdict, cell(ev))
		}
		m.printf("\n")
	}

	m.searches(in) // reports/search.go
	m.variants(vars)
	m.operatingPoints(in.Analysis)
	m.validity(d)

	m.printf("## Server and run\n\n")
	m.printf("What the experiment declared, beside what the run found.\n\n")
	m.printf("| | Declared | Discovered | |\n|---|---|---|---|\n")
	for _, f := range record.ServerComparison(p, man) {
		flag := ""
		if f.Mismatch != "" {
			flag = "⚠ " + cell(f.Mismatch)
		}
		m.printf("| %s | %s | %s | %s |\n", f.Name, cell(f.Declared), cell(f.Discovered), flag)
	}
	m.printf("\n| | |\n|---|---|\n")
	for _, kv := range record.RunFacts(man) {
		m.printf("| %s | %s |\n", kv[0], cell(kv[1]))
	}
	m.printf("\n")
	if len(exp.Metadata) > 0 {
		m.printf("Metadata: %s\n\n", cell(record.FormatMap(exp.Metadata)))
	}

	m.printf("## Workload matrix\n\n")
	m.printf("| Row | Question | Load | Input tokens | Output tokens | Stop | Verdict | Validity |\n|---|---|---|---|---|---|---|---|\n")
	for i := range p.Rows {
		r := &p.Rows[i]
		in, out := inputText(p, r), r.Output.String()
		if r.Prefix != nil {
			in += fmt.Sprintf(" (%d shared prefix, %d distinct%s)", r.Prefix.Length, r.Prefix.Distinct, map[bool]string{true: ", warm"}[r.Prefix.Warm])
		}
		in += conversationText(r)
		rv := d.Row(r.ID)
		verdict := record.MatrixVerdict(rv, sum.Row(r.ID))
		m.printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", code(r.ID), cell(r.Question), cell(loadText(r)), in, out, cell(r.Stop()), verdictCell(verdict), validityCell(rv))
	}
	for _, id := range p.Skipped {
		m.printf("| %s | | | | | | %s | — |\n", code(id), verdictCell(verdict.Skipped))
	}
	m.printf("\n")

	m.printf("## Results\n\n")
	m.printf("Latencies in ms, as p50 / p95 / p99 over successful measured requests; throughput over each row's measured window. Definitions: docs/metrics.md, %s.\n\n", semanticsText(sum.Semantics))
	// Embeddings and rerank rows count inputs, in a column of their own
	// (reports/endpoints.go).
	pooled := anyPooled(p)
	inputsHead, inputsRule, inputsGap := "", "", ""
	if pooled {
		inputsHead, inputsRule, inputsGap = " Inputs/s |", "---|", " |"
	}
	m.printf("| Row | OK / sent | TTFT | TPOT | ITL | E2E | Req/s |%s Output tok/s | Tok/s per user | Goodput | Errors |\n|---|---|---|---|---|---|---|%s---|---|---|---|\n", inputsHead, inputsRule)
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if rs.Status == metrics.RowNotRun {
			m.printf("| %s | not run | | | | | |%s | | | |\n", code(rs.ID), inputsGap)
			continue
		}
		mt := rs.Metrics
		status := fmt.Sprintf("%d / %d", rs.Requests.Completed, rs.Requests.Sent)
		if rv := d.Row(rs.ID); rv != nil && !rv.Validity.Valid {
			status += " ⚠ invalid"
		}
		if rs.Status == metrics.RowInterrupted {
			status += " (interrupted)"
		}
		if rs.Status == metrics.RowFailed {
			status += " (failed: " + rs.Error + ")"
		}
		goodput := "—"
		if !sum.SLO.IsZero() {
			goodput = fmt.Sprintf("%.1f%% (%s req/s)", 100*rs.Goodput.Ratio, numfmt.Num(rs.Goodput.RequestsPerS))
		}
		out, perUser, inputs := throughputCells(p, rs)
		reqs := numfmt.Num(rs.Throughput.RequestsPerS)
		if pooled {
			reqs += " | " + inputs
		}
		m.printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", code(rs.ID), cell(status),
			triple(mt.TTFT), triple(mt.TPOT), itlCell(rs, p.Validity), triple(mt.E2E),
			reqs, out, perUser, goodput, cell(errorsCell(rs)))
	}
	m.printf("\n")
	if !sum.SLO.IsZero() {
		m.printf("Goodput counts requests meeting every SLO: %s.\n\n", record.SLOText(sum.SLO))
	}
	m.semanticsNotes(sum)
	m.errorExamples(sum)
	m.trials(sum)
	m.ramps(sum, d) // reports/ramp.go
	m.turns(sum)
	m.baseline(d.Baseline)
	m.telemetry(sum)
	m.cost(sum, d)

	if in.Analysis != nil {
		m.predictions(in.Plan, in.Analysis.Predictions)
	}

	if len(p.Acceptance) > 0 {
		m.printf("## Acceptance\n\n")
		for _, a := range p.Acceptance {
			how := ""
			if a.Sweep == schema.SweepOperatingPoint {
				how = " (asks each sweep for an operating point)"
			}
			m.printf("- **%s**: %s%s\n", cell(a.Name), codeSpan(a.Program.Source), how)
		}
		m.printf("\n| Row | Rule | Result |\n|---|---|---|\n")
		for _, rv := range d.Rows {
			for _, rr := range rv.Rules {
				res := "pass"
				if !rr.Pass {
					res = "**fail**: " + failureText(rr)
				}
				if rv.Verdict == verdict.Invalid {
					res = "not judged (invalid row); its figures would " + res
				}
				if rr.Unjudged != "" {
					res = "not judged: " + cell(rr.Unjudged)
				}
				m.printf("| %s | %s | %s |\n", code(rv.ID), cell(rr.Rule), res)
			}
		}
		m.printf("\n")
	}

	var rejected []verdict.RowVerdict
	for _, rv := range d.Rows {
		if rv.Verdict == verdict.Fail || rv.Verdict == verdict.Rejected {
			rejected = append(rejected, rv)
		}
	}
	if len(rejected) > 0 {
		m.printf("## Rejected rows\n\n")
		for _, rv := range rejected {
			var why []string
			for _, rr := range rv.Rules {
				if !rr.Pass {
					why = append(why, cell(rr.Rule)+": "+failureText(rr))
				}
			}
			past := ""
			if rv.Verdict == verdict.Rejected {
				past = " (past the operating point: it does not fail the run)"
			}
			m.printf("- %s%s: %s\n", codeSpan(rv.ID), past, strings.Join(why, "; "))
		}
		m.printf("\n")
	}

	m.diagnosis(record.Diagnosis(in.Plan, in.Summary, in.Analysis, d))
	m.selfCheck(sum)

	m.plots(in.plots)

	m.printf("## Reproduce\n\n")
	cmd := reproduceCommand(man)
	fence := fenceFor(cmd)
	m.printf("%ssh\n%s\n%s\n\n", fence, cmd, fence)
	m.printf("Experiment %s, sha256 %s (check with `sha256sum -c %s` in the run directory).\n", codeSpan(man.Experiment.File), codeSpan(man.Experiment.SHA256), rundir.HashFile)
	return m.err
}

// semanticsText names the definitions a summary follows, for the sentence
// that points to them.
func semanticsText(sem string) string {
	switch sem {
	case metrics.SemVLLM:
		return "**semantics `vllm`**: as `vllm bench serve` defines them"
	case metrics.SemAIPerf:
		return "**semantics `aiperf`**: as NVIDIA AIPerf defines them with its default options"
	}
	return "semantics `infermatrix`"
}

// semanticsNotes lists where a tool's semantics departs from the tool or
// keeps infermatrix's definitions, and each row's records that lacked what
// it needs. A reader comparing with that tool's output needs every one.
func (m *mdWriter) semanticsNotes(sum *metrics.Summary) {
	var rows []*metrics.RowSummary
	for i := range sum.Rows {
		if len(sum.Rows[i].SemanticsNotes) > 0 {
			rows = append(rows, &sum.Rows[i])
		}
	}
	if len(sum.SemanticsNotes) == 0 && len(rows) == 0 {
		return
	}
	m.printf("Under semantics %s:\n\n", codeSpan(sum.Semantics))
	for _, n := range sum.SemanticsNotes {
		m.printf("- %s.\n", cell(n))
	}
	for _, rs := range rows {
		m.printf("- %s: %s.\n", codeSpan(rs.ID), cell(strings.Join(rs.SemanticsNotes, "; ")))
	}
	m.printf("\n")
}

// errorExamples lists, for every row with failed requests, each error
// class with the message of its first request: what went wrong, which the
// Results table's counts do not say.
func (m *mdWriter) errorExamples(sum *metrics.Summary) {
	lines := errorLines(sum)
	if len(lines) == 0 {
		return
	}
	m.printf("Errors, with the first message of each class (every message is in the row's requests.jsonl):\n\n")
	m.printf("| Row | Class | Requests | First message |\n|---|---|---|---|\n")
	for _, l := range lines {
		m.printf("| %s | %s | %d | %s |\n", code(l.Row), l.Class, l.Count, cell(l.Message))
	}
	m.printf("\n")
}

// errorLine is one row's count and first message of one error class.
type errorLine struct {
	Row, Class, Message string
	Count               int
}

// errorLines lists each row's error classes in the fixed class order.
func errorLines(sum *metrics.Summary) []errorLine {
	var out []errorLine
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		for _, c := range metrics.ErrorClasses {
			if n := rs.Errors.ByClass[c]; n > 0 {
				out = append(out, errorLine{Row: rs.ID, Class: c, Count: n, Message: rs.Errors.Examples[c]})
			}
		}
	}
	return out
}

// selfCheck writes, for every row with something measured about the
// client, how well it kept to an open-loop schedule, its CPU use and
// measurement error, and whether the server counted the lengths the row
// asked for.
func (m *mdWriter) selfCheck(sum *metrics.Summary) {
	var rows []*metrics.RowSummary
	shared := false
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		c := rs.SelfCheck
		shared = shared || c.SharedWithServer
		if c.RequestedRate > 0 || c.Cores > 0 || c.MeasurementErrorMS > 0 || c.ClientBound ||
			rs.Tokens.Input.Requests+rs.Tokens.Output.Requests > 0 || rs.InFlight.Max > 0 {
			rows = append(rows, rs)
		}
	}
	if len(rows) == 0 {
		return
	}
	m.printf("## Client self-check\n\n")
	m.printf("Whether the client measured the server rather than itself, and what load the server saw. For open-loop rows: the rate asked for, the rate of the arrival schedule drawn for this run, the rate requests actually left the client at, and how late they left (queue time behind a concurrency cap excluded). For every row: requests in flight (time-weighted mean over the measured window, and the most at once); the client process's CPU use as a share of its cores; how late its probe timers fired (p99) and the estimated lateness of its timestamps (clock resolution plus p99 scheduling delay; docs/metrics.md says what it leaves out); the share of token events read together with the one before; the share of prompt tokens the server served from its prefix cache, and of those the row did not share on purpose. Then the server's token counts against the requested lengths, as the mean relative difference; beyond ±%g%% the row measured another workload than it says.\n\n", 100*metrics.TokenMismatchLimit)
	if shared {
		m.printf("The built-in server runs in the client's process: its CPU use and scheduling delay count too.\n\n")
	}
	m.printf("| Row | Requested / scheduled / achieved req/s | Dispatch lag p50 / p99 (ms) | In flight mean / max | Client CPU | Timer lateness p99 / measurement error (ms) | Zero gaps | Cache hits (unasked) | Input tokens vs requested | Output tokens vs requested | Client |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	var mismatched []*metrics.RowSummary
	for _, rs := range rows {
		c := rs.SelfCheck
		rates, lag := "—", "—"
		if c.RequestedRate > 0 {
			rates = numfmt.Num(c.RequestedRate) + " / " + numfmt.Num(c.ScheduledRate) + " / " + numfmt.Num(c.AchievedRate)
		}
		if c.DispatchLag.Count > 0 {
			lag = numfmt.Num(c.DispatchLag.P50) + " / " + numfmt.Num(c.DispatchLag.P99)
		}
		cpu, merr := "—", "—"
		if c.Cores > 0 {
			cpu = fmt.Sprintf("%.0f%% of %d cores", 100*c.ClientCPU, c.Cores)
			if c.HostCPU > 0 {
				cpu += fmt.Sprintf(" (machine %.0f%%)", 100*c.HostCPU)
			}
		}
		if c.MeasurementErrorMS > 0 || c.TimerLatenessP99MS > 0 {
			merr = optNum(c.TimerLatenessP99MS) + " / " + optNum(c.MeasurementErrorMS)
		}
		inflight := "—"
		if rs.InFlight.Max > 0 {
			inflight = numfmt.Num(rs.InFlight.Mean) + " / " + numfmt.Num(float64(rs.InFlight.Max))
		}
		zero := "—"
		if c.Gaps > 0 {
			zero = fmt.Sprintf("%.1f%%", 100*c.ZeroGapShare)
		}
		verdict := "ok"
		switch {
		case c.ClientBound:
			verdict = "**client-bound**: " + cell(strings.Join(c.Notes, "; "))
		case len(c.Notes) > 0:
			verdict = "ok; " + cell(strings.Join(c.Notes, "; "))
		}
		if rs.Tokens.Mismatch {
			mismatched = append(mismatched, rs)
		}
		m.printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", code(rs.ID), rates, lag, inflight, cpu, merr, zero, cacheCell(rs.Cache),
			lengthCell(rs.Tokens.Input), lengthCell(rs.Tokens.Output), verdict)
	}
	m.printf("\n")
	if len(mismatched) > 0 {
		m.printf("**Token lengths differ from the requested ones:**\n\n")
		for _, rs := range mismatched {
			m.printf("- %s: %s.\n", codeSpan(rs.ID), cell(strings.Join(rs.Tokens.Notes, "; ")))
		}
		m.printf("\n")
	}
}

// optNum is a figure, or "—" when it was not measured (zero).
func optNum(v float64) string {
	if v == 0 {
		return "—"
	}
	return numfmt.Num(v)
}

// cacheCell shows the server's prefix-cache hit ratio and the share of
// it the row did not ask for, or "unknown" when the server did not say.
func cacheCell(c metrics.Cache) string {
	if !c.Known() {
		return "unknown"
	}
	return fmt.Sprintf("%.1f%% (%.1f%%)", 100*c.HitRatio, 100*c.UnexpectedRatio)
}

// lengthCell shows one side of the token check.
func lengthCell(l metrics.LengthCheck) string {
	if l.Requests == 0 {
		return "—"
	}
	s := fmt.Sprintf("%+.1f%%", 100*l.Diff)
	if l.Mismatch {
		s = "**" + s + " mismatch**"
	}
	return s
}

type mdWriter struct {
	w   io.Writer
	err error
}

// printf writes a piece of the record with every control character and
// escape sequence removed (textsafe.Terminal): decision.md is read with cat
// as often as in a browser, and a model id or an error message from the
// server must not drive the reader's terminal from either.
func (m *mdWriter) printf(format string, args ...any) {
	if m.err == nil {
		_, m.err = io.WriteString(m.w, textsafe.Terminal(fmt.Sprintf(format, args...)))
	}
}

func (m *mdWriter) verdict(d *verdict.Decision, sum *metrics.Summary) {
	if sum.Interrupted {
		m.printf("> **Interrupted.** The run was stopped before it finished; the numbers below cover only what was measured.\n\n")
	}
	headline, _ := record.VerdictHeadline(d)
	m.printf("**Verdict: %s.** %s\n\n", headline, record.VerdictDetail(d))
}

// answer states each question's answer in a sentence, under the
// verdict (record.AnswerOf).
func (m *mdWriter) answer(a *record.Answer) {
	for _, l := range a.Lines {
		if l.Question != "" {
			m.printf("- *%s* %s\n", cell(l.Question), l.Text)
		} else {
			m.printf("- %s: %s\n", codeSpan(l.Base), l.Text)
		}
	}
	for _, e := range a.Extra {
		m.printf("- %s\n", e)
	}
	if len(a.Lines)+len(a.Extra) > 0 {
		m.printf("\n")
	}
}

// validity lists every invalid row with each failed check and what to do
// about it, and the notes of the valid ones.
func (m *mdWriter) validity(d *verdict.Decision) {
	var invalid, noted []*verdict.RowVerdict
	for i := range d.Rows {
		rv := &d.Rows[i]
		switch {
		case rv.Verdict == verdict.NotRun || rv.Verdict == verdict.Skipped:
		case !rv.Validity.Valid:
			invalid = append(invalid, rv)
		case len(rv.Validity.Notes) > 0:
			noted = append(noted, rv)
		}
	}
	if len(invalid) == 0 && len(noted) == 0 {
		return
	}
	m.printf("## Validity\n\n")
	if len(invalid) > 0 {
		m.printf("A row is valid when its figures mean what they say (docs/validity.md). These rows are not, and are not judged:\n\n")
		m.printf("| Row | Check | Why | What to do |\n|---|---|---|---|\n")
		for _, rv := range invalid {
			for _, r := range rv.Validity.Reasons {
				m.printf("| %s | %s | %s | %s |\n", code(rv.ID), cell(r.Check), cell(r.Message), cell(r.Fix))
			}
		}
		m.printf("\n")
	}
	var notes []string
	for _, n := range record.GroupedNotes(d) {
		notes = append(notes, fmt.Sprintf("- %s: %s.", record.CodeList(n.Rows), cell(n.Text)))
	}
	if len(notes) > 0 {
		m.printf("Notes:\n\n%s\n\n", strings.Join(notes, "\n"))
	}
	if len(d.Rows) > 0 && len(d.Rows[0].Validity.Ignored) > 0 {
		m.printf("Checks switched off by the experiment: %s.\n\n", strings.Join(d.Rows[0].Validity.Ignored, ", "))
	}
}

func verdictCell(v string) string {
	switch v {
	case verdict.Pass:
		return "✅ pass"
	case verdict.Fail:
		return "❌ **fail**"
	case verdict.Invalid:
		return "⚠ invalid"
	case verdict.Rejected:
		return "rejected (past capacity)"
	case record.FailedNotJudged:
		return "❌ " + v
	case "":
		return "—"
	}
	return v
}

// validityCell is a row's validity for the matrix: ✓, or the failed
// checks.
func validityCell(rv *verdict.RowVerdict) string {
	t := record.ValidityText(rv)
	switch {
	case t == "—":
		return t
	case rv.Validity.Valid && t == "valid":
		return "✓ valid"
	}
	return "⚠ " + t
}

// itlCell is the ITL triple, marked when the row's token events came in
// bursts: then its ITL is made of zeros and bursts, not the server's pace.
func itlCell(rs *metrics.RowSummary, v schema.ValidityPlan) string {
	t := triple(rs.Metrics.ITL)
	if c := rs.SelfCheck; c.Gaps >= 20 && c.ZeroGapShare > v.ZeroGapShare {
		t += fmt.Sprintf(" ⚠ bursts (%.0f%% zero gaps)", 100*c.ZeroGapShare)
	}
	return t
}

// triple formats p50 / p95 / p99 of a latency, all three with the
// precision that suits the largest, so they line up when compared.
func triple(d metrics.Dist) string {
	if d.Count == 0 {
		return "—"
	}
	dec := numfmt.Decimals(d.P99)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', dec, 64) }
	return f(d.P50) + " / " + f(d.P95) + " / " + f(d.P99)
}

func errorsCell(rs *metrics.RowSummary) string {
	s := "0"
	if rs.Errors.Total > 0 {
		var parts []string
		for _, c := range metrics.ErrorClasses {
			if n := rs.Errors.ByClass[c]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", c, n))
			}
		}
		s = fmt.Sprintf("%d (%s)", rs.Errors.Total, strings.Join(parts, ", "))
	}
	if rs.Requests.Canceled > 0 {
		s += fmt.Sprintf("; %d cancelled by the client", rs.Requests.Canceled)
	}
	if rs.Requests.Retried > 0 {
		s += fmt.Sprintf("; %d resent on a new connection", rs.Requests.Retried)
	}
	return s
}

// failureText says why a rule failed, as Markdown safe in a table cell:
// each failed clause with the measured values it read.
func failureText(rr verdict.RuleResult) string {
	if rr.Reason != "" {
		return cell(rr.Reason)
	}
	var parts []string
	for _, c := range rr.Failed {
		t := code(c.Text)
		switch {
		case c.Reason != "":
			t += " (" + cell(c.Reason) + ")"
		case len(c.Values) > 0:
			t += " with " + cell(record.FormatValues(c.Values))
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, "; ")
}

// cell makes text safe inside a Markdown table cell, and anywhere else on
// a line: textsafe.MarkdownCell. Server-supplied text (model ids, error
// messages) and the experiment's prose go through it, so that nothing in
// them can become a tag, a link, an image or a new table cell.
func cell(s string) string {
	return textsafe.MarkdownCell(s)
}

// code formats text as a code span that is safe in a table cell. Inside a
// code span Markdown shows entities literally, so only the pipe, which
// would end the cell, is escaped (GitHub removes the backslash there).
func code(s string) string {
	return codeSpan(strings.ReplaceAll(s, "|", `\|`))
}

// codeSpan formats text as a code span outside tables. Markup inside a
// code span is shown as written; only a backtick could end it early, so
// the delimiter is one backtick longer than the longest run inside.
func codeSpan(s string) string {
	s = strings.Join(strings.Fields(textsafe.Terminal(s)), " ")
	delim := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.Contains(s, "`") {
		return delim + " " + s + " " + delim
	}
	return delim + s + delim
}

// fenceFor is a code fence that text cannot close: longer than any run of
// backticks in it.
func fenceFor(text string) string {
	return strings.Repeat("`", max(3, longestRun(text, '`')+1))
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// reproduceCommand is the command that ran the experiment, shell-quoted,
// with URL credentials masked (redact.Args).
func reproduceCommand(man *rundir.Manifest) string {
	var args []string
	for i := 0; i < len(man.Command); i++ {
		a := man.Command[i]
		// --out names this run's directory, which now exists: a rerun
		// must write elsewhere, so it is left out.
		if a == "--out" {
			i++
			continue
		}
		if strings.HasPrefix(a, "--out=") {
			continue
		}
		args = append(args, a)
	}
	if len(args) == 0 {
		args = []string{"infermatrix", "run", man.Experiment.File}
	}
	args = redact.Args(args)
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = record.ShellQuote(a)
	}
	if q[0] != "infermatrix" && strings.HasSuffix(args[0], "infermatrix") {
		q[0] = "infermatrix"
	}
	return strings.Join(q, " ")
}

// operatingPoints states each sweep's operating point and knee, right after
// the verdict: with it, the first screen answers "how far can we push it".
func (m *mdWriter) operatingPoints(an *analysis.Analysis) {
	if an == nil || len(an.Sweeps) == 0 {
		return
	}
	m.printf("## Operating point\n\n")
	for _, sw := range an.Sweeps {
		m.printf("- **%s**: %s\n", codeSpan(sw.Base), sw.Why)
	}
	m.printf("\n")
}

// predictions compares each row with the bandwidth math of
// docs/predictions.md.
func (m *mdWriter) predictions(p *schema.Plan, preds []analysis.RowPrediction) {
	if len(preds) == 0 {
		return
	}
	m.printf("## Prediction against measurement\n\n")
	m.printf("Lower bounds from the roofline (docs/predictions.md): TPOT at batch one, bandwidth-bound; prefill compute-bound. Measured values are p50.")
	if p.Experiment != nil && p.Experiment.Predict != nil {
		if d, err := p.Experiment.Predict.Deployment(); err == nil {
			m.printf(" Assumed: %s on %d× %s, weights %g bytes and KV %g bytes per element, η_bw %g, η_f %g.",
				cell(d.Model.Name), d.Replicas, cell(d.GPU.Name), d.Precision.Weight, d.Precision.KV, d.Efficiency.Bandwidth, d.Efficiency.FLOPs)
		}
	}
	m.printf("\n\n")
	m.printf("| Row | Context | Decode tok/s per stream | TPOT bound | TPOT measured | ×bound | Prefill bound | TTFT measured | ×bound | KV capacity | Max concurrency | Regime |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	ratio := func(r float64) string {
		if r == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", r)
	}
	ms := func(v float64) string {
		if v == 0 {
			return "—"
		}
		return numfmt.Num(v) + " ms"
	}
	for _, p := range preds {
		m.printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s<br>%s |\n", code(p.Row), numfmt.Num(p.Context),
			numfmt.Num(p.DecodeTokensPerS), ms(p.TPOTBoundMS), ms(p.MeasuredTPOTMS), ratio(p.TPOTRatio),
			ms(p.PrefillBoundMS), ms(p.MeasuredTTFTMS), ratio(p.TTFTRatio),
			numfmt.Num(float64(p.KVCapacityTokens)), numfmt.Num(float64(p.MaxConcurrency)), p.Regime, cell(p.Evidence))
	}
	m.printf("\n")
}

// plots embeds the rendered charts, which Write stores beside decision.md.
func (m *mdWriter) plots(plots []charts.Plot) {
	if len(plots) == 0 {
		return
	}
	m.printf("## Plots\n\n")
	for _, p := range plots {
		m.printf("![%s](%s/%s.png)\n\n", cell(p.Title), PlotsDir, p.Name)
	}
}
