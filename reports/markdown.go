package reports

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
)

// Input is everything a decision record is rendered from.
type Input struct {
	Plan     *schema.Plan
	Manifest *rundir.Manifest
	Summary  *metrics.Summary
	Decision *Decision
	// Analysis is derived from the above by Analyze; Write fills it in.
	Analysis *Analysis
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

	plots []Plot // rendered by Write, linked from decision.md
}

// WriteMarkdown renders decision.md: GitHub-flavoured Markdown for a pull
// request, in the order a reviewer reads: the question and verdict first,
// then what was run on what, the numbers, why rows were rejected, and how
// to reproduce it.
func WriteMarkdown(w io.Writer, in *Input) error {
	m := &mdWriter{w: w}
	p, man, sum, d := in.Plan, in.Manifest, in.Summary, in.Decision
	exp := p.Experiment

	m.printf("# Decision record: %s\n\n", exp.Name)
	if exp.Description != "" {
		m.printf("%s\n\n", exp.Description)
	}
	if len(d.Hypotheses) > 0 {
		m.printf("## Hypotheses\n\n")
		m.printf("| | Hypothesis | Verdict | Evidence |\n|---|---|---|---|\n")
		for _, h := range d.Hypotheses {
			ev := formatValues(h.Values)
			if h.Reason != "" {
				ev = h.Reason
			}
			m.printf("| %s | %s<br>%s | **%s** | %s |\n", cell(h.ID), cell(h.Statement), code(h.Expect), h.Verdict, cell(ev))
		}
		m.printf("\n")
	}

	m.verdict(d, sum)
	m.operatingPoints(in.Analysis)

	m.printf("## Server and run\n\n")
	m.printf("| | |\n|---|---|\n")
	for _, kv := range serverFacts(p, man) {
		m.printf("| %s | %s |\n", kv[0], cell(kv[1]))
	}
	m.printf("\n")
	if len(exp.Metadata) > 0 {
		m.printf("Metadata: %s\n\n", cell(formatMap(exp.Metadata)))
	}

	m.printf("## Workload matrix\n\n")
	m.printf("| Row | Question | Load | Input tokens | Output tokens | Stop | Verdict |\n|---|---|---|---|---|---|---|\n")
	verdicts := map[string]string{}
	for _, rv := range d.Rows {
		verdicts[rv.ID] = rv.Verdict
	}
	for i := range p.Rows {
		r := &p.Rows[i]
		in, out := r.Input.String(), r.Output.String()
		if r.Prefix != nil {
			in += fmt.Sprintf(" (%d shared prefix, %d distinct%s)", r.Prefix.Length, r.Prefix.Distinct, map[bool]string{true: ", warm"}[r.Prefix.Warm])
		}
		m.printf("| `%s` | %s | %s | %s | %s | %s | %s |\n", r.ID, cell(r.Question), cell(r.Load.String()), in, out, cell(r.Stop()), verdictCell(verdicts[r.ID]))
	}
	m.printf("\n")

	m.printf("## Results\n\n")
	m.printf("Latencies in ms, as p50 / p95 / p99 over successful measured requests; throughput over each row's measured window. Definitions: docs/metrics.md, %s.\n\n", semanticsText(sum.Semantics))
	m.printf("| Row | OK / sent | TTFT | TPOT | ITL | E2E | Req/s | Output tok/s | Tok/s per user | Goodput | Errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if rs.Status == metrics.RowNotRun {
			m.printf("| `%s` | not run | | | | | | | | | |\n", rs.ID)
			continue
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
		if !sum.SLO.IsZero() {
			goodput = fmt.Sprintf("%.1f%% (%s req/s)", 100*rs.Goodput.Ratio, num(rs.Goodput.RequestsPerS))
		}
		m.printf("| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rs.ID, cell(status),
			triple(mt.TTFT), triple(mt.TPOT), triple(mt.ITL), triple(mt.E2E),
			num(rs.Throughput.RequestsPerS), num(rs.Throughput.OutputTokensPerS), num(rs.Throughput.OutputTokensPerSU),
			goodput, cell(errorsCell(rs)))
	}
	m.printf("\n")
	if !sum.SLO.IsZero() {
		m.printf("Goodput counts requests meeting every SLO: %s.\n\n", sloText(sum.SLO))
	}
	m.semanticsNotes(sum)

	if in.Analysis != nil {
		m.predictions(in.Plan, in.Analysis.Predictions)
	}

	if len(p.Acceptance) > 0 {
		m.printf("## Acceptance\n\n")
		for _, a := range p.Acceptance {
			m.printf("- **%s**: %s\n", cell(a.Name), codeSpan(a.Program.Source))
		}
		m.printf("\n| Row | Rule | Result |\n|---|---|---|\n")
		for _, rv := range d.Rows {
			for _, rr := range rv.Rules {
				res := "pass"
				if !rr.Pass {
					res = "**fail**: " + failureText(rr)
				}
				m.printf("| `%s` | %s | %s |\n", rv.ID, cell(rr.Rule), res)
			}
		}
		m.printf("\n")
	}

	var rejected []RowVerdict
	for _, rv := range d.Rows {
		if rv.Verdict == Fail {
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
			m.printf("- `%s`: %s\n", rv.ID, strings.Join(why, "; "))
		}
		m.printf("\n")
	}

	m.selfCheck(sum)

	m.plots(in.plots)

	m.printf("## Reproduce\n\n")
	if in.JudgedBy != "" {
		m.printf("> Judged by %s, not by the experiment the run was made with: its acceptance rules and hypotheses were re-evaluated against the recorded measurements (`infermatrix report --experiment`).\n\n", cell(in.JudgedBy))
	}
	m.printf("```sh\n%s\n```\n\n", reproduceCommand(man))
	m.printf("Experiment `%s`, sha256 `%s` (check with `sha256sum -c %s` in the run directory).\n", man.Experiment.File, man.Experiment.SHA256, rundir.HashFile)
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
	m.printf("Under semantics `%s`:\n\n", sum.Semantics)
	for _, n := range sum.SemanticsNotes {
		m.printf("- %s.\n", cell(n))
	}
	for _, rs := range rows {
		m.printf("- `%s`: %s.\n", rs.ID, cell(strings.Join(rs.SemanticsNotes, "; ")))
	}
	m.printf("\n")
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
			rs.Tokens.Input.Requests+rs.Tokens.Output.Requests > 0 {
			rows = append(rows, rs)
		}
	}
	if len(rows) == 0 {
		return
	}
	m.printf("## Client self-check\n\n")
	m.printf("Whether the client measured the server rather than itself. For open-loop rows: the rate asked for, the rate of the arrival schedule drawn for this run, the rate requests actually left the client at, and how late they left (queue time behind a concurrency cap excluded). For every row: the client process's CPU use as a share of its cores, and the estimated lateness of its timestamps (clock resolution plus p99 scheduling delay; docs/metrics.md says what it leaves out). Then the server's token counts against the requested lengths, as the mean relative difference; beyond ±%g%% the row measured another workload than it says.\n\n", 100*metrics.TokenMismatchLimit)
	if shared {
		m.printf("The built-in server runs in the client's process: its CPU use and scheduling delay count too.\n\n")
	}
	m.printf("| Row | Requested / scheduled / achieved req/s | Dispatch lag p50 / p99 (ms) | Client CPU | Measurement error (ms) | Input tokens vs requested | Output tokens vs requested | Client |\n|---|---|---|---|---|---|---|---|\n")
	var mismatched []*metrics.RowSummary
	for _, rs := range rows {
		c := rs.SelfCheck
		rates, lag := "—", "—"
		if c.RequestedRate > 0 {
			rates = num(c.RequestedRate) + " / " + num(c.ScheduledRate) + " / " + num(c.AchievedRate)
		}
		if c.DispatchLag.Count > 0 {
			lag = num(c.DispatchLag.P50) + " / " + num(c.DispatchLag.P99)
		}
		cpu, merr := "—", "—"
		if c.Cores > 0 {
			cpu = fmt.Sprintf("%.0f%% of %d cores", 100*c.ClientCPU, c.Cores)
			if c.HostCPU > 0 {
				cpu += fmt.Sprintf(" (machine %.0f%%)", 100*c.HostCPU)
			}
		}
		if c.MeasurementErrorMS > 0 {
			merr = num(c.MeasurementErrorMS)
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
		m.printf("| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", rs.ID, rates, lag, cpu, merr,
			lengthCell(rs.Tokens.Input), lengthCell(rs.Tokens.Output), verdict)
	}
	m.printf("\n")
	if len(mismatched) > 0 {
		m.printf("**Token lengths differ from the requested ones:**\n\n")
		for _, rs := range mismatched {
			m.printf("- `%s`: %s.\n", rs.ID, cell(strings.Join(rs.Tokens.Notes, "; ")))
		}
		m.printf("\n")
	}
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

func (m *mdWriter) printf(format string, args ...any) {
	if m.err == nil {
		_, m.err = fmt.Fprintf(m.w, format, args...)
	}
}

func (m *mdWriter) verdict(d *Decision, sum *metrics.Summary) {
	pass, fail, none, notRun := d.byVerdict()
	var bound []string
	for _, rs := range sum.Rows {
		if rs.SelfCheck.ClientBound {
			bound = append(bound, rs.ID)
		}
	}
	if sum.Interrupted {
		m.printf("> **Interrupted.** The run was stopped before it finished; the numbers below cover only what was measured.\n\n")
	}
	judged := len(pass) + len(fail)
	switch d.Verdict {
	case Pass:
		m.printf("**Verdict: PASS.** %d of %d judged rows meet acceptance.", len(pass), judged)
	case Fail:
		m.printf("**Verdict: FAIL.** %d of %d judged rows are rejected: %s.", len(fail), judged, codeList(fail))
	case Incomplete:
		m.printf("**Verdict: INCOMPLETE.** Rows with acceptance rules have no verdict (%s); this record cannot sign a plan off.", codeList(notRun))
	case NoRules:
		m.printf("**Verdict: none.** The experiment has no acceptance rules; these numbers are for reading, not for sign-off.")
	}
	switch {
	case len(none) == 1 && d.Verdict != NoRules:
		m.printf(" 1 row has no acceptance rule.")
	case len(none) > 1 && d.Verdict != NoRules:
		m.printf(" %d rows have no acceptance rule.", len(none))
	}
	if len(notRun) > 0 && d.Verdict != Incomplete {
		m.printf(" Not run: %s.", codeList(notRun))
	}
	m.printf("\n\n")
	if len(bound) > 0 {
		m.printf("> **Client-bound rows:** %s. The client fell behind the load it was asked to offer, or its CPU was saturated, so these rows may measure the client rather than the server; see [Client self-check](#client-self-check).\n\n", codeList(bound))
	}
}

func codeList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = "`" + id + "`"
	}
	return strings.Join(q, ", ")
}

func verdictCell(v string) string {
	switch v {
	case Pass:
		return "✅ pass"
	case Fail:
		return "❌ **fail**"
	case "":
		return "—"
	}
	return v
}

// serverFacts lists what was measured on: declared and discovered server
// facts, the tool, and the run.
func serverFacts(p *schema.Plan, man *rundir.Manifest) [][2]string {
	s := man.Server.Declared
	var out [][2]string
	add := func(k, v string) {
		if strings.TrimSpace(v) != "" {
			out = append(out, [2]string{k, v})
		}
	}
	if s.Builtin {
		add("Target", simTarget(s.Sim))
	} else {
		add("Target", strings.Join(s.URLs, ", "))
	}
	add("API", s.API)
	add("Model", s.Model)
	disc := man.Server.Discovered
	add("Server lists", discoveredModels(disc))
	if disc.Error != "" {
		add("Discovery", disc.Error)
	}
	add("Server header", disc.Server)
	e := s.Engine
	eng := strings.TrimSpace(e.Name + " " + e.Version)
	if e.Image != "" {
		eng += " (" + e.Image + ")"
	}
	add("Engine", eng)
	if len(e.Flags) > 0 {
		add("Engine flags", formatMap(e.Flags))
	}
	h := s.Hardware
	if h.GPU != "" {
		gpu := h.GPU
		if h.Count > 0 {
			gpu = fmt.Sprintf("%d × %s", h.Count, h.GPU)
		}
		add("GPU", gpu)
	}
	add("Driver", h.Driver)
	add("CUDA", h.CUDA)
	add("Server host", h.Host)
	add("Hardware notes", h.Notes)
	tool := "infermatrix " + man.Tool.Version
	if man.Tool.Commit != "" {
		tool += " (" + shortCommit(man.Tool.Commit) + ")"
	}
	add("Tool", tool+", "+man.Tool.Go)
	add("Client host", fmt.Sprintf("%s (%s/%s, %d CPUs)", man.Host.Name, man.Host.OS, man.Host.Arch, man.Host.CPUs))
	run := man.Started.Format("2006-01-02 15:04:05 UTC")
	if man.Ended != nil {
		run += fmt.Sprintf(" to %s (%s)", man.Ended.Format("15:04:05 UTC"), man.Ended.Sub(man.Started).Round(1e8))
	}
	add("Run", run)
	add("Experiment", fmt.Sprintf("%s, sha256 %s", man.Experiment.File, shortCommit(man.Experiment.SHA256)))
	return out
}

func shortCommit(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func formatMap(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// triple formats p50 / p95 / p99 of a latency, all three with the
// precision that suits the largest, so they line up when compared.
func triple(d metrics.Dist) string {
	if d.Count == 0 {
		return "—"
	}
	dec := decimals(d.P99)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', dec, 64) }
	return f(d.P50) + " / " + f(d.P95) + " / " + f(d.P99)
}

// decimals is the number of decimals that suits a value's size: enough
// digits to compare rows, no false precision.
func decimals(v float64) int {
	switch a := abs64(v); {
	case a < 1:
		return 3
	case a < 10:
		return 2
	case a < 1000:
		return 1
	default:
		return 0
	}
}

// num formats one measurement with the precision its size suits; whole
// numbers (counts, mostly) print without decimals.
func num(v float64) string {
	if v == float64(int64(v)) && abs64(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', decimals(v), 64)
}

func abs64(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
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

func sloText(s metrics.SLO) string {
	var parts []string
	if s.TTFTms > 0 {
		parts = append(parts, fmt.Sprintf("TTFT ≤ %g ms", s.TTFTms))
	}
	if s.TPOTms > 0 {
		parts = append(parts, fmt.Sprintf("TPOT ≤ %g ms", s.TPOTms))
	}
	if s.ITLms > 0 {
		parts = append(parts, fmt.Sprintf("largest ITL ≤ %g ms", s.ITLms))
	}
	if s.E2Ems > 0 {
		parts = append(parts, fmt.Sprintf("E2E ≤ %g ms", s.E2Ems))
	}
	return strings.Join(parts, ", ")
}

// failureText says why a rule failed, as Markdown safe in a table cell:
// each failed clause with the measured values it read.
func failureText(rr RuleResult) string {
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
			t += " with " + cell(formatValues(c.Values))
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, "; ")
}

func formatValues(vs []Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Name + " = " + num(v.Value)
	}
	return strings.Join(parts, ", ")
}

// cell makes text safe inside a Markdown table cell. Server-supplied text
// (error messages) goes through it too: pipes would break the table, and
// raw HTML has no place in a record.
func cell(s string) string {
	s = oneLine(s)
	r := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

// code formats text as a code span that is safe in a table cell. Inside a
// code span Markdown shows entities literally, so only the pipe, which
// would end the cell, is escaped (GitHub removes the backslash there).
func code(s string) string {
	return codeSpan(strings.ReplaceAll(s, "|", `\|`))
}

// codeSpan formats text as a code span outside tables.
func codeSpan(s string) string {
	s = oneLine(s)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// reproduceCommand is the command that ran the experiment, shell-quoted.
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
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	if q[0] != "infermatrix" && strings.HasSuffix(args[0], "infermatrix") {
		q[0] = "infermatrix"
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// simTarget describes the built-in server in one line: what it simulates,
// which matters to a reader as much as a real server's GPU does.
func simTarget(s schema.SimSettings) string {
	if s.Preset == schema.PresetFixed {
		return fmt.Sprintf("built-in simulator, fixed latencies (TTFT %s, ITL %s, max_model_len %d)", s.TTFT, s.ITL, s.MaxModelLen)
	}
	var extra []string
	if s.Replicas > 1 {
		extra = append(extra, fmt.Sprintf("%d replicas", s.Replicas))
	}
	if s.PhysicsOnly {
		extra = append(extra, "physics only")
	}
	if s.Personality != "" && s.Personality != "vllm" {
		extra = append(extra, s.Personality+" personality")
	}
	if len(s.Faults) > 0 {
		extra = append(extra, fmt.Sprintf("%d fault rules", len(s.Faults)))
	}
	extra = append(extra, fmt.Sprintf("max_model_len %d", s.MaxModelLen))
	return fmt.Sprintf("built-in simulator, preset %s (%s; see docs/simulator.md)", s.Preset, strings.Join(extra, ", "))
}

// operatingPoints states each sweep's operating point and knee, right after
// the verdict: with it, the first screen answers "how far can we push it".
func (m *mdWriter) operatingPoints(an *Analysis) {
	if an == nil || len(an.Sweeps) == 0 {
		return
	}
	m.printf("## Operating point\n\n")
	for _, sw := range an.Sweeps {
		m.printf("- **`%s`**: %s\n", sw.Base, sw.Why)
	}
	m.printf("\n")
}

// predictions compares each row with the bandwidth math of
// docs/predictions.md.
func (m *mdWriter) predictions(p *schema.Plan, preds []RowPrediction) {
	if len(preds) == 0 {
		return
	}
	m.printf("## Prediction against measurement\n\n")
	m.printf("Lower bounds from the roofline (docs/predictions.md): TPOT at batch one, bandwidth-bound; prefill compute-bound. Measured values are p50.")
	if p.Experiment != nil && p.Experiment.Predict != nil {
		if d, err := p.Experiment.Predict.Deployment(); err == nil {
			m.printf(" Assumed: %s on %d× %s, weights %g bytes and KV %g bytes per element, η_bw %g, η_f %g.",
				d.Model.Name, d.Replicas, d.GPU.Name, d.Precision.Weight, d.Precision.KV, d.Efficiency.Bandwidth, d.Efficiency.FLOPs)
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
		return num(v) + " ms"
	}
	for _, p := range preds {
		m.printf("| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s<br>%s |\n", p.Row, num(p.Context),
			num(p.DecodeTokensPerS), ms(p.TPOTBoundMS), ms(p.MeasuredTPOTMS), ratio(p.TPOTRatio),
			ms(p.PrefillBoundMS), ms(p.MeasuredTTFTMS), ratio(p.TTFTRatio),
			num(float64(p.KVCapacityTokens)), num(float64(p.MaxConcurrency)), p.Regime, cell(p.Evidence))
	}
	m.printf("\n")
}

// plots embeds the rendered charts, which Write stores beside decision.md.
func (m *mdWriter) plots(plots []Plot) {
	if len(plots) == 0 {
		return
	}
	m.printf("## Plots\n\n")
	for _, p := range plots {
		m.printf("![%s](%s/%s.png)\n\n", cell(p.Title), PlotsDir, p.Name)
	}
}

// discoveredModels lists the models the server's /models answered with,
// each with its context limit when it gave one; "" when it listed none.
func discoveredModels(disc rundir.Discovered) string {
	ms := make([]string, 0, len(disc.Models))
	for _, md := range disc.Models {
		t := md.ID
		if md.MaxModelLen > 0 {
			t += fmt.Sprintf(" (max_model_len %d)", md.MaxModelLen)
		}
		ms = append(ms, t)
	}
	return strings.Join(ms, ", ")
}
