package record

import (
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/discovery"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// The pieces of a decision record that every renderer shows in the same
// words: the verdict's sentence, the validity of each row, what the file
// declared beside what the run found. They are written here once, as text
// with `code` spans, so that decision.md, report.html and results.xlsx
// cannot tell a reader different things.

// verdictHeadline is the run verdict as the record's headline, and the
// class the HTML page colours it with.
func VerdictHeadline(d *verdict.Decision) (headline, class string) {
	switch d.Verdict {
	case verdict.Pass:
		return "PASS", "pass"
	case verdict.Fail:
		return "FAIL", "fail"
	case verdict.Inconclusive:
		return "INCONCLUSIVE", "incomplete"
	case verdict.Incomplete:
		return "INCOMPLETE", "incomplete"
	}
	return "none", "none"
}

// verdictDetail says what decided the verdict, in sentences with row ids
// as code spans.
func VerdictDetail(d *verdict.Decision) string {
	by := d.ByVerdict()
	pass, fail, rejected, invalid := by[verdict.Pass], by[verdict.Fail], by[verdict.Rejected], by[verdict.Invalid]
	judged := len(pass) + len(fail) + len(rejected) + len(invalid)
	var b strings.Builder
	switch d.Verdict {
	case verdict.Pass:
		fmt.Fprintf(&b, "%d of %d judged rows are valid and meet acceptance.", len(pass), judged)
		if len(rejected) > 0 {
			fmt.Fprintf(&b, " Sweep points past the operating point, rejected as intended: %s.", CodeList(rejected))
		}
	case verdict.Fail:
		valid := len(pass) + len(fail) + len(rejected)
		if len(fail) > 0 {
			fmt.Fprintf(&b, "%d of %d valid judged rows fail acceptance: %s.", len(fail), valid, CodeList(fail))
		}
		var rest []string
		for _, w := range d.Why {
			if !strings.HasPrefix(w, "failed acceptance") {
				rest = append(rest, w)
			}
		}
		if len(rest) > 0 {
			fmt.Fprintf(&b, " Also: %s.", strings.Join(rest, "; "))
		}
	case verdict.Inconclusive:
		fmt.Fprintf(&b, "Nothing failed, but this record cannot sign a plan off: %s.", strings.Join(d.Why, "; "))
	case verdict.Incomplete:
		b.WriteString("The run was interrupted; this record cannot sign a plan off.")
		if len(d.Why) > 0 {
			fmt.Fprintf(&b, " So far: %s.", strings.Join(d.Why, "; "))
		}
	default:
		b.WriteString("The experiment has no acceptance rules; these numbers are for reading, not for sign-off.")
		if d.MostFailed {
			fmt.Fprintf(&b, " **Most requests failed** (%d of %d): the run measured failures, not the server's performance.", d.Failed, d.Sent)
		}
	}
	if d.Verdict != verdict.NoRules {
		if n := len(by[verdict.NoRules]); n == 1 {
			b.WriteString(" 1 row has no acceptance rule.")
		} else if n > 1 {
			fmt.Fprintf(&b, " %d rows have no acceptance rule.", n)
		}
	}
	if d.Rebuilt != "" {
		b.WriteString(" " + d.Rebuilt)
	}
	if d.Verdict == verdict.Pass || d.Verdict == verdict.NoRules {
		var bad []string
		for _, rv := range d.Rows {
			if rv.Verdict == verdict.NoRules && !rv.Validity.Valid {
				bad = append(bad, rv.ID)
			}
		}
		if len(bad) > 0 {
			fmt.Fprintf(&b, " Rows without rules whose figures are invalid: %s.", CodeList(bad))
		}
	}
	return b.String()
}

func CodeList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = "`" + id + "`"
	}
	return strings.Join(q, ", ")
}

// MatrixVerdict is a row's verdict as the workload matrix shows it: a row
// that failed partway (its server unreachable, its records unwritable) is
// "not run" to the judge, which judges nothing of it, but it did run, and
// its results table has what it measured before it failed.
func MatrixVerdict(rv *verdict.RowVerdict, rs *metrics.RowSummary) string {
	if rv == nil {
		return ""
	}
	if rv.Verdict == verdict.NotRun && rs != nil && rs.Status == metrics.RowFailed {
		return FailedNotJudged
	}
	return rv.Verdict
}

// FailedNotJudged is the matrix's verdict of a row that failed.
const FailedNotJudged = "failed (not judged)"

// validityText is a row's validity at a glance: "valid", "invalid: load,
// samples", or "—" for a row without measurements.
func ValidityText(rv *verdict.RowVerdict) string {
	if rv == nil || rv.Verdict == verdict.NotRun || rv.Verdict == verdict.Skipped {
		return "—"
	}
	return rv.Validity.Summary()
}

// serverFact is one line of the declared-against-discovered table.
type ServerFact struct {
	Name       string
	Declared   string
	Discovered string
	// Mismatch says how the two disagree; empty when they agree or one
	// of them is unknown.
	Mismatch string
}

// serverComparison puts what the experiment declared about the server
// beside what the run found, and flags where they disagree. Against the
// built-in server, the declared engine and hardware describe what the
// simulation stands in for; the discovered column says what actually
// answered.
func ServerComparison(p *schema.Plan, man *rundir.Manifest) []ServerFact {
	decl, disc := man.Server.Declared, man.Server.Discovered
	sim := disc.Simulated
	if sim == nil && disc.Engine == SimEngine {
		sim = &rundir.Simulated{} // infermatrix sim on its own port: its settings are not known here
	}
	var out []ServerFact
	add := func(name, declared, discovered, mismatch string) {
		if strings.TrimSpace(declared) == "" && strings.TrimSpace(discovered) == "" {
			return
		}
		out = append(out, ServerFact{Name: name, Declared: orDash(declared), Discovered: orDash(discovered), Mismatch: mismatch})
	}
	target := strings.Join(decl.URLs, ", ")
	if decl.Builtin {
		target = "builtin"
	}
	found := disc.URL
	if decl.Builtin {
		found = SimTarget(decl.Sim)
	}
	add("Target", target, found, "")

	models := DiscoveredModels(disc)
	mm := ""
	if decl.Model != "" && len(disc.Models) > 0 && !servesModel(disc, decl.Model) {
		mm = "the server does not list the declared model"
	}
	if disc.Error != "" {
		models = strings.TrimSpace(models + " (" + disc.Error + ")")
	}
	add("Model", decl.Model, models, mm)

	e := decl.Engine
	engine := e.Name
	if e.Image != "" {
		engine += " (" + e.Image + ")"
	}
	foundEngine, foundVersion := disc.Engine, disc.EngineVersion
	if disc.EngineFrom != "" && foundEngine != "" {
		foundEngine += " (from " + disc.EngineFrom + ")"
	}
	mm = ""
	switch {
	case sim != nil && e.Name != "" && !sameEngine(e.Name, SimEngine):
		mm = "SIMULATED: the declared engine did not serve this run"
	case sim == nil && e.Name != "" && disc.Engine != "" && !sameEngine(e.Name, disc.Engine):
		mm = "the server names another engine"
	}
	if sim != nil {
		foundEngine = SimEngine + " (simulated)"
	}
	add("Engine", engine, foundEngine, mm)
	mm = ""
	if sim == nil && e.Version != "" && foundVersion != "" && !strings.Contains(foundVersion, e.Version) && !strings.Contains(e.Version, foundVersion) {
		mm = "the server reports another version"
	}
	if sim != nil && e.Version != "" {
		mm = "SIMULATED"
	}
	add("Engine version", e.Version, foundVersion, mm)
	if len(e.Flags) > 0 {
		mm = ""
		if sim != nil {
			mm = "SIMULATED: flags were not applied"
		}
		add("Engine flags", FormatMap(redact.Flags(e.Flags)), "", mm)
	}
	if sim == nil {
		// The limits the engine reported beside the flags that set them.
		eng := disc.Engine
		if eng == "" {
			eng = e.Name
		}
		for _, c := range discovery.CompareFlags(eng, e.Flags, disc.Properties) {
			add(c.Label, c.Declared, c.Discovered, c.Mismatch)
		}
	} else if n := disc.Properties[discovery.MaxModelLen]; n != "" {
		add("Max model length", "", n, "")
	}
	add("Server header", "", disc.Server, "")

	h := decl.Hardware
	gpu := h.GPU
	if h.GPU != "" && h.Count > 0 {
		gpu = fmt.Sprintf("%d × %s", h.Count, h.GPU)
	}
	foundGPU, mm := "", ""
	if sim != nil {
		foundGPU = fmt.Sprintf("none: simulated %d × %s", max(sim.Replicas, 1), sim.GPU)
		if sim.GPU == "" {
			foundGPU = "none: simulated"
		}
		if gpu != "" {
			mm = "SIMULATED: no GPU served this run"
		}
	} else if len(disc.GPUModels) > 0 {
		foundGPU = discovery.GPUs(disc.GPUModels) + " (from the DCGM exporter)"
		mm = discovery.CompareGPU(h.GPU, h.Count, disc.GPUModels)
	} else if gpu != "" {
		foundGPU = "not discovered: no DCGM exporter was scraped (telemetry.gpu)"
	}
	add("GPU", gpu, foundGPU, mm)
	for _, f := range [][2]string{{"Driver", h.Driver}, {"CUDA", h.CUDA}, {"Server host", h.Host}, {"Hardware notes", h.Notes}} {
		mm = ""
		if sim != nil && f[1] != "" {
			mm = "SIMULATED"
		}
		add(f[0], f[1], "", mm)
	}
	return out
}

// runFacts lists what the run was: the tool, the client host, when, and
// which experiment.
func RunFacts(man *rundir.Manifest) [][2]string {
	var out [][2]string
	if api := man.Server.Declared.API; api != "" {
		// Rows that call another endpoint (their own api) are named.
		var own []string
		for _, r := range man.Rows {
			if r.API != "" && r.API != api {
				own = append(own, r.ID+": "+r.API)
			}
		}
		if len(own) > 0 {
			api += "; rows " + strings.Join(own, ", ")
		}
		out = append(out, [2]string{"API", api})
	}
	tool := "infermatrix " + man.Tool.Version
	if man.Tool.Commit != "" {
		tool += " (" + verdict.ShortCommit(man.Tool.Commit) + ")"
	}
	out = append(out, [2]string{"Tool", tool + ", " + man.Tool.Go})
	out = append(out, [2]string{"Client host", fmt.Sprintf("%s (%s/%s, %d CPUs)", man.Host.Name, man.Host.OS, man.Host.Arch, man.Host.CPUs)})
	run := man.Started.Format("2006-01-02 15:04:05 UTC")
	if man.Ended != nil {
		run += fmt.Sprintf(" to %s (%s)", man.Ended.Format("15:04:05 UTC"), man.Ended.Sub(man.Started).Round(1e8))
	}
	out = append(out, [2]string{"Run", run})
	out = append(out, [2]string{"Experiment", fmt.Sprintf("%s, sha256 %s", man.Experiment.File, verdict.ShortCommit(man.Experiment.SHA256))})
	out = append(out, shardFacts(man)...)
	return out
}

// simEngine is the engine name the built-in server goes by (runner's
// SimEngineName; reports does not import runner).
const SimEngine = "infermatrix-sim"

// simulated reports whether the run measured the built-in server: in the
// run's process, or on its own port, where it names itself.
func Simulated(man *rundir.Manifest) bool {
	return man != nil && (man.Server.Declared.Builtin || man.Server.Discovered.Engine == SimEngine)
}

// SimulatedTag is what a simulated run's title says it is: SIMULATED, and
// for a run on the built-in server's virtual clock, VIRTUAL TIME as well.
func SimulatedTag(man *rundir.Manifest) string {
	if man != nil && man.Virtual {
		return "SIMULATED, VIRTUAL TIME"
	}
	return "SIMULATED"
}

// simulatedBanner is the sentence every record of a simulated run opens
// with.
func SimulatedBanner(man *rundir.Manifest) string {
	if man.Virtual {
		return "SIMULATED, VIRTUAL TIME: every figure here comes from infermatrix's " + SimTarget(man.Server.Declared.Sim) +
			", run on its virtual clock (run --virtual): no GPU, no socket, and no client measured a byte on the wall clock. " +
			"The engine and hardware the experiment declares describe what the simulation stands in for (docs/simulator.md)."
	}
	what := "infermatrix's " + SimTarget(man.Server.Declared.Sim)
	if !man.Server.Declared.Builtin {
		what = "infermatrix's simulated server at " + man.Server.Discovered.URL + " (infermatrix sim)"
	}
	return "SIMULATED: every figure here comes from " + what + ", not from a GPU. The engine and hardware the experiment declares describe what the simulation stands in for."
}

func servesModel(d rundir.Discovered, model string) bool {
	for _, m := range d.Models {
		if m.ID == model {
			return true
		}
	}
	return false
}

// sameEngine compares engine names loosely: "llama.cpp" is "llamacpp",
// "vLLM" is "vllm".
func sameEngine(a, b string) bool {
	norm := func(s string) string {
		return strings.NewReplacer(".", "", "-", "", "_", "", " ", "").Replace(strings.ToLower(s))
	}
	x, y := norm(a), norm(b)
	return x == y || strings.HasPrefix(x, y) || strings.HasPrefix(y, x)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}

// rowNote is a validity note and the rows it is about.
type RowNote struct {
	Text string
	Rows []string
}

// groupedNotes gathers the rows' validity notes, each text once with every
// row it applies to, in the order the notes first appear.
func GroupedNotes(d *verdict.Decision) []RowNote {
	var out []RowNote
	at := map[string]int{}
	for _, rv := range d.Rows {
		if rv.Verdict == verdict.NotRun || rv.Verdict == verdict.Skipped {
			continue
		}
		for _, n := range rv.Validity.Notes {
			i, ok := at[n]
			if !ok {
				i = len(out)
				at[n] = i
				out = append(out, RowNote{Text: n})
			}
			out[i].Rows = append(out[i].Rows, rv.ID)
		}
	}
	return out
}
