package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
)

// synthRow is a row of a synthetic run: n streamed requests of 64 output
// tokens whose TTFT and TPOT are log-normal around the given medians (ms).
type synthRow struct {
	id, base    string
	sweep       map[string]float64
	concurrency int
	n           int
	ttft, tpot  float64
	errors      int    // requests that fail with an HTTP error
	invalid     string // a failed validity check, or ""
	seed        uint64 // the row's own random draws; 0: the run's seed
	// trialTput, when set, gives the row trials with these output
	// throughputs (the figures repeat writes per trial).
	trialTput []float64
	// inputStddev varies the planned prompt lengths: 0 is a row whose
	// every length is equal (see lockstep).
	inputStddev float64
}

type synthRun struct {
	name, experiment string
	started          time.Time
	seed             uint64
	semantics        string
	driver           string
	flags            map[string]any
	rows             []synthRow
}

// write creates the run directory: manifest.json, each row's records,
// summary.json (summarised from the records as the runner does) and
// decision.json.
func (sr synthRun) write(t *testing.T, parent string) string {
	t.Helper()
	dir := filepath.Join(parent, sr.name)
	d, err := rundir.Create("", "", dir, sr.started)
	if err != nil {
		t.Fatal(err)
	}
	exp := sr.experiment
	if exp == "" {
		exp = "synthetic"
	}
	m := rundir.Manifest{Format: rundir.Format, Experiment: rundir.ExperimentInfo{Name: exp, SHA256: "abc"},
		Started: sr.started, Status: rundir.StatusComplete, Semantics: sr.semantics,
		Host: rundir.Host{Name: "ci", OS: "linux", Arch: "amd64", CPUs: 8}}
	m.Server.Declared = schema.ServerPlan{API: "chat", URLs: []string{"http://127.0.0.1:8000/v1"},
		Engine: schema.Engine{Name: "vllm", Version: "0.11.0", Flags: sr.flags}, Hardware: schema.Hardware{GPU: "H100", Driver: sr.driver}}
	sum := metrics.Summary{Format: metrics.SummaryFormat, Experiment: exp, Percentiles: []float64{50, 90, 95, 99},
		Semantics: sr.semantics, SLO: metrics.SLO{TPOTms: 50}}
	type dRow struct {
		ID       string           `json:"id"`
		Verdict  string           `json:"verdict"`
		Validity validity.Verdict `json:"validity"`
	}
	dec := struct {
		Verdict string `json:"verdict"`
		Rows    []dRow `json:"rows"`
	}{Verdict: "no rules"}
	for i, r := range sr.rows {
		rng := rand.New(rand.NewPCG(sr.seed, uint64(i)))
		if r.seed != 0 {
			rng = rand.New(rand.NewPCG(r.seed, 0))
		}
		c := max(r.concurrency, 1)
		pr := schema.PlannedRow{ID: r.id, Base: r.base, SweepPoint: r.sweep, Requests: r.n,
			Load:  schema.LoadPlan{Mode: schema.ModeConcurrency, Concurrency: c},
			Input: schema.Length{Mean: 256, Stddev: r.inputStddev}, Output: schema.Length{Mean: 64}, Streaming: true}
		if pr.Base == "" {
			pr.Base = r.id
		}
		m.Rows = append(m.Rows, pr)
		w, err := d.CreateRecords(r.id)
		if err != nil {
			t.Fatal(err)
		}
		agg := metrics.NewAggregator(metrics.Options{Percentiles: sum.Percentiles, SLO: sum.SLO, Semantics: sr.semantics, API: "chat"})
		for i := range r.n {
			ttft := int64(r.ttft * math.Exp(0.2*rng.NormFloat64()) * 1e6)
			gap := int64(r.tpot * math.Exp(0.15*rng.NormFloat64()) * 1e6)
			rec := &metrics.Record{ID: "r", Row: r.id, Seq: int64(i), Stream: true, StartNS: int64(i) * 3e9,
				FirstTokenNS: ttft, OutputTokens: metrics.Tokens{Requested: 64, Client: 64}, InputTokens: metrics.Tokens{Requested: 256, Client: 256}}
			if i < r.errors {
				rec.Error = &metrics.Error{Class: metrics.ErrHTTP, Message: "503"}
				rec.FirstTokenNS, rec.EndNS, rec.Status = 0, 1e6, 503
			} else {
				for k := range 64 {
					rec.Events = append(rec.Events, ttft+int64(k)*gap)
				}
				rec.LastTokenNS = rec.Events[63]
				rec.EndNS = rec.LastTokenNS + 1000
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			agg.Add(rec)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rs := agg.Summary(r.id, pr.Base, metrics.RowComplete)
		for k, v := range r.trialTput {
			rs.Trials = append(rs.Trials, metrics.RowSummary{ID: r.id, Trial: k + 1, Throughput: metrics.Throughput{OutputTokensPerS: v}})
		}
		sum.Rows = append(sum.Rows, rs)
		v := validity.Verdict{Valid: r.invalid == ""}
		if r.invalid != "" {
			v.Reasons = []validity.Reason{{Check: r.invalid, Message: "synthetic"}}
		}
		dec.Rows = append(dec.Rows, dRow{ID: r.id, Verdict: "no rules", Validity: v})
	}
	for _, f := range []struct {
		name string
		v    any
	}{{rundir.ManifestFile, m}, {rundir.SummaryFile, sum}, {decisionFile, dec}} {
		if err := d.WriteJSON(f.name, f.v); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func pair(t *testing.T, base, new synthRun) *Comparison {
	t.Helper()
	parent := t.TempDir()
	c, err := compareDirs(base.write(t, parent), new.write(t, parent), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func compareDirs(a, b string, opts Options) (*Comparison, error) {
	base, err := Load(a)
	if err != nil {
		return nil, err
	}
	new, err := Load(b)
	if err != nil {
		return nil, err
	}
	return Compare(base, new, opts)
}

func oneRow(name string, seed uint64, started time.Time, tpot float64) synthRun {
	return synthRun{name: name, seed: seed, started: started, rows: []synthRow{{id: "chat", n: 400, ttft: 40, tpot: tpot}}}
}

func (c *Comparison) metricOf(row, key string) *MetricChange {
	for i := range c.Rows {
		if c.Rows[i].ID == row {
			return c.Rows[i].metric(key)
		}
	}
	return nil
}

// A/A: two runs drawn from the same distributions compare as no regression.
func TestSameDistributionIsNoRegression(t *testing.T) {
	c := pair(t, oneRow("a", 1, t0, 10), oneRow("b", 2, t0.Add(time.Hour), 10))
	if c.Verdict != VerdictOK || len(c.Regressions) != 0 {
		t.Fatalf("verdict %q, regressions %+v; want no regression", c.Verdict, c.Regressions)
	}
	m := c.metricOf("chat", "tpot.p95")
	if m == nil || m.CI == nil || m.Verdict == NotJudged {
		t.Fatalf("tpot.p95 not judged: %+v", m)
	}
	if !(m.CI.Lower < 0.05 && m.CI.Upper > -0.05) || math.Abs(m.Change) > 0.05 {
		t.Errorf("tpot.p95 change %+.3f CI %+v; want near 0", m.Change, *m.CI)
	}
}

// A/B: 25% slower decode is a significant TPOT regression, named, and
// every latency after the first token moves with it; TTFT does not.
func TestSlowerDecodeIsTPOTRegression(t *testing.T) {
	c := pair(t, oneRow("a", 1, t0, 10), oneRow("b", 2, t0.Add(time.Hour), 12.5))
	if c.Verdict != VerdictRegression {
		t.Fatalf("verdict %q; want regression", c.Verdict)
	}
	m := c.metricOf("chat", "tpot.p95")
	if m.Verdict != Regression || !m.Significant || !m.Worse || m.Change < 0.15 || m.Change > 0.35 {
		t.Errorf("tpot.p95 %+v; want a regression of about +25%%", m)
	}
	if m.CI.Lower < 0.1 || m.CI.Upper > 0.4 {
		t.Errorf("tpot.p95 CI %+v; want an interval around the true +25%%", *m.CI)
	}
	if v := c.metricOf("chat", "ttft.p50").Verdict; v == Regression {
		t.Errorf("ttft.p50 %s; TTFT did not change", v)
	}
	var buf bytes.Buffer
	c.WriteTerminal(&buf)
	if !strings.Contains(buf.String(), "REGRESSION chat tpot.p95 +2") {
		t.Errorf("terminal does not name the regression:\n%s", buf.String())
	}
	if first := strings.Index(buf.String(), "REGRESSION"); first < 0 || first > strings.Index(buf.String(), "row ") {
		t.Errorf("regressions are not listed first:\n%s", buf.String())
	}
}

// A 2% change is within the default threshold, even when significant.
func TestSmallChangeIsNotFlagged(t *testing.T) {
	if raceEnabled {
		t.Skip("computation only: make test runs it in its second pass, without the race detector, which slows it sixfold")
	}
	c := pair(t, oneRow("a", 1, t0, 10), oneRow("b", 1, t0.Add(time.Hour), 10.2))
	if c.Verdict != VerdictOK {
		t.Fatalf("verdict %q (%s); want no regression for +2%%", c.Verdict, c.Why)
	}
	m := c.metricOf("chat", "tpot.p50")
	if m.Verdict != Within && m.Verdict != NoChange {
		t.Errorf("tpot.p50 %s; want within threshold or no change", m.Verdict)
	}
	// The same change judged at a 1% threshold for tpot is a regression,
	// once there are enough requests to tell 2% apart from noise.
	parent := t.TempDir()
	big := func(name string, started time.Time, tpot float64) synthRun {
		r := oneRow(name, 1, started, tpot)
		r.rows[0].n = 3000
		return r
	}
	a, b := big("a", t0, 10).write(t, parent), big("b", t0.Add(time.Hour), 10.2).write(t, parent)
	c, err := compareDirs(a, b, Options{Thresholds: map[string]float64{"tpot": 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	if m := c.metricOf("chat", "tpot.p50"); m.Verdict != Regression || m.Threshold != 0.01 {
		t.Errorf("tpot.p50 at threshold tpot=1%%: %s (threshold %g); want regression", m.Verdict, m.Threshold)
	}
	if m := c.metricOf("chat", "ttft.p50"); m.Threshold != DefaultThreshold {
		t.Errorf("ttft.p50 threshold %g; want the default", m.Threshold)
	}
}

// Rows added, removed and changed are listed with what changed, and only
// rows with the same id and workload are compared.
func TestRowsAddedRemovedChanged(t *testing.T) {
	base := synthRun{name: "a", seed: 1, started: t0, rows: []synthRow{
		{id: "same", n: 100, ttft: 40, tpot: 10, seed: 5},
		{id: "gone", n: 100, ttft: 40, tpot: 10},
		{id: "sweep/c=4", base: "sweep", sweep: map[string]float64{"concurrency": 4}, concurrency: 4, n: 100, ttft: 40, tpot: 10},
	}}
	new := synthRun{name: "b", seed: 2, started: t0.Add(time.Hour), rows: []synthRow{
		{id: "same", n: 100, ttft: 40, tpot: 10, seed: 5},
		{id: "sweep/c=4", base: "sweep", sweep: map[string]float64{"concurrency": 4}, concurrency: 8, n: 100, ttft: 40, tpot: 30},
		{id: "fresh", n: 100, ttft: 40, tpot: 10},
	}}
	c := pair(t, base, new)
	kinds := map[string]RowDiff{}
	for _, d := range c.Diffs {
		kinds[d.ID] = d
	}
	if kinds["gone"].Kind != RowRemoved || kinds["fresh"].Kind != RowAdded || kinds["sweep/c=4"].Kind != RowChanged {
		t.Fatalf("diffs %+v; want gone removed, fresh added, sweep/c=4 changed", c.Diffs)
	}
	if ch := kinds["sweep/c=4"].Changes; len(ch) != 1 || ch[0].Field != "load" || !strings.Contains(ch[0].New, `"concurrency":8`) {
		t.Errorf("sweep/c=4 changes %+v; want the load, concurrency 4 → 8", ch)
	}
	if len(c.Rows) != 1 || c.Rows[0].ID != "same" {
		t.Errorf("compared rows %+v; want only same", c.Rows)
	}
	if c.Verdict != VerdictOK {
		t.Errorf("verdict %q; the changed row's tripled TPOT must not count", c.Verdict)
	}
	var md bytes.Buffer
	if err := c.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| gone | removed |", "| fresh | added |", "| sweep/c=4 | changed: load"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("comparison.md lacks %q:\n%s", want, md.String())
		}
	}
}

// Different semantics make every row another measurement.
func TestSemanticsChangeRows(t *testing.T) {
	a, b := oneRow("a", 1, t0, 10), oneRow("b", 2, t0.Add(time.Hour), 10)
	b.semantics = metrics.SemAIPerf
	c := pair(t, a, b)
	if len(c.Diffs) != 1 || c.Diffs[0].Kind != RowChanged || c.Diffs[0].Changes[0].Field != "semantics" {
		t.Fatalf("diffs %+v; want chat changed in semantics", c.Diffs)
	}
	if c.Verdict != VerdictNotComparable {
		t.Errorf("verdict %q; want not comparable (no row left)", c.Verdict)
	}
}

// An invalid row is never a regression, however much worse it looks.
func TestInvalidRowIsNotComparable(t *testing.T) {
	a := oneRow("a", 1, t0, 10)
	b := oneRow("b", 2, t0.Add(time.Hour), 30)
	b.rows[0].invalid = validity.ClientCPU
	b.rows = append(b.rows, synthRow{id: "other", n: 100, ttft: 40, tpot: 10, seed: 9})
	a.rows = append(a.rows, synthRow{id: "other", n: 100, ttft: 40, tpot: 10, seed: 9})
	c := pair(t, a, b)
	if c.Verdict != VerdictOK || len(c.Regressions) != 0 {
		t.Fatalf("verdict %q regressions %+v; an invalid row must not regress", c.Verdict, c.Regressions)
	}
	rc := c.Rows[0]
	if rc.Comparable || rc.Reason != "new: invalid: client_cpu" || len(rc.Metrics) != 0 {
		t.Errorf("row %+v; want not comparable, new: invalid: client_cpu", rc)
	}
}

// The error ratio is compared as a proportion, in the worse direction.
func TestErrorRatioRegression(t *testing.T) {
	a, b := oneRow("a", 1, t0, 10), oneRow("b", 2, t0.Add(time.Hour), 10)
	a.rows[0].errors, b.rows[0].errors = 4, 60
	c := pair(t, a, b)
	m := c.metricOf("chat", "errors.ratio")
	if m.Verdict != Regression || m.BaseN != 400 || !m.Absolute || math.Abs(m.Change-0.14) > 1e-9 {
		t.Errorf("errors.ratio %+v; want a regression from 1%% to 15%% of 400, +14 points", m)
	}
	if g := c.metricOf("chat", "goodput.ratio"); g.Verdict != Regression || g.Worse != true {
		t.Errorf("goodput.ratio %+v; failed requests are not good: want a regression", g)
	}
}

func TestDifferentExperimentsNeedForce(t *testing.T) {
	parent := t.TempDir()
	a := oneRow("a", 1, t0, 10)
	b := oneRow("b", 2, t0.Add(time.Hour), 10)
	b.experiment = "other"
	pa, pb := a.write(t, parent), b.write(t, parent)
	if _, err := compareDirs(pa, pb, Options{}); !errors.Is(err, ErrNotComparable) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("err %v; want ErrNotComparable naming --force", err)
	}
	c, err := compareDirs(pa, pb, Options{Force: true})
	if err != nil || c.Verdict != VerdictOK || len(c.Notes) == 0 {
		t.Fatalf("with force: %v, %+v", err, c)
	}
}

// A run killed before its summaries cannot be compared until report has
// rebuilt them, and the error says so.
func TestMissingSummaryAsksForReport(t *testing.T) {
	dir := oneRow("a", 1, t0, 10).write(t, t.TempDir())
	if err := os.Remove(filepath.Join(dir, rundir.SummaryFile)); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if !errors.Is(err, ErrNotComparable) || !strings.Contains(err.Error(), "infermatrix report "+dir) {
		t.Fatalf("err %v; want ErrNotComparable asking for infermatrix report", err)
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNotComparable) {
		t.Errorf("an empty folder: %v; want ErrNotComparable", err)
	}
}

// A folder of runs gives its two newest by start time, whatever their
// names, skipping the latest link and comparison folders.
func TestResolveNewestTwo(t *testing.T) {
	parent := t.TempDir()
	oneRow("zzz-oldest", 1, t0, 10).write(t, parent)
	mid := oneRow("mmm-middle", 2, t0.Add(time.Hour), 10).write(t, parent)
	newest := oneRow("aaa-newest", 3, t0.Add(2*time.Hour), 10).write(t, parent)
	if err := os.Symlink("zzz-oldest", filepath.Join(parent, "latest")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(parent, "compare-x-y"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, n, err := Resolve([]string{parent})
	if err != nil || b != mid || n != newest {
		t.Fatalf("Resolve = %s, %s, %v; want %s, %s", b, n, err, mid, newest)
	}
	if _, _, err := Resolve([]string{mid}); !errors.Is(err, ErrNotComparable) {
		t.Errorf("one run: %v; want ErrNotComparable", err)
	}
}

// The what-changed table names the driver and masks a credential flag.
func TestManifestChanges(t *testing.T) {
	a, b := oneRow("a", 1, t0, 10), oneRow("b", 2, t0.Add(time.Hour), 10)
	a.driver, b.driver = "570.1", "580.95"
	a.flags = map[string]any{"api-key": "sk-base-secret", "max-num-seqs": 64}
	b.flags = map[string]any{"api-key": "sk-new-secret", "max-num-seqs": 128}
	c := pair(t, a, b)
	got := map[string]Change{}
	for _, ch := range c.Changes {
		got[ch.Field] = ch
	}
	if d := got["server.declared.hardware.driver"]; d.Base != "570.1" || d.New != "580.95" {
		t.Errorf("driver change %+v", d)
	}
	f := got["server.declared.engine.flags"]
	if !strings.Contains(f.New, "max-num-seqs=128") || strings.Contains(f.Base+f.New, "secret") {
		t.Errorf("flags change %+v; want max-num-seqs shown and the key masked", f)
	}
	if _, ok := got["experiment.sha256"]; ok {
		t.Errorf("same experiment file listed as changed: %+v", c.Changes)
	}
}

func TestParseThreshold(t *testing.T) {
	for _, tt := range []struct {
		in   string
		key  string
		v    float64
		fail string
	}{
		{"5%", "", 0.05, ""},
		{"0.03", "", 0.03, ""},
		{"tpot=3%", "tpot", 0.03, ""},
		{"tpot.p95=2.5%", "tpot.p95", 0.025, ""},
		{"tpt=3%", "", 0, "did you mean `tpot`"},
		{"5", "", 0, "5%"},
		{"fast", "", 0, "percentage"},
	} {
		k, v, err := ParseThreshold(tt.in)
		if tt.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tt.fail) {
				t.Errorf("ParseThreshold(%q) error %v; want one containing %q", tt.in, err, tt.fail)
			}
			continue
		}
		if err != nil || k != tt.key || math.Abs(v-tt.v) > 1e-12 {
			t.Errorf("ParseThreshold(%q) = %q, %g, %v; want %q, %g", tt.in, k, v, err, tt.key, tt.v)
		}
	}
}

// The same two runs always give the same comparison, byte for byte, and
// the files are self-contained.
func TestReproducibleAndWritten(t *testing.T) {
	parent := t.TempDir()
	sweep := func(name string, seed uint64, started time.Time, tpot float64) synthRun {
		r := synthRun{name: name, seed: seed, started: started}
		for _, c := range []int{1, 4} {
			r.rows = append(r.rows, synthRow{id: "sweep/c=" + string(rune('0'+c)), base: "sweep",
				sweep: map[string]float64{"concurrency": float64(c)}, concurrency: c, n: 200, ttft: 40, tpot: tpot * float64(c)})
		}
		return r
	}
	a, b := sweep("a", 1, t0, 10).write(t, parent), sweep("b", 2, t0.Add(time.Hour), 13).write(t, parent)
	var js [2][]byte
	for i := range js {
		c, err := compareDirs(a, b, Options{})
		if err != nil {
			t.Fatal(err)
		}
		paths, err := c.Write(c.DefaultDir())
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(parent, "compare-a-b", MarkdownFile); paths[0] != want {
			t.Errorf("wrote %s; want %s", paths[0], want)
		}
		js[i], _ = os.ReadFile(filepath.Join(c.DefaultDir(), JSONFile))
	}
	if !bytes.Equal(js[0], js[1]) {
		t.Error("two comparisons of the same runs differ")
	}
	var parsed Comparison
	if err := json.Unmarshal(js[0], &parsed); err != nil || parsed.Format != Format || len(parsed.Regressions) == 0 {
		t.Errorf("comparison.json: %v, %+v", err, parsed.Regressions)
	}
	html, _ := os.ReadFile(filepath.Join(parent, "compare-a-b", HTMLFile))
	if n := strings.Count(string(html), `src="data:image/png;base64,`); n < 4 {
		t.Errorf("comparison.html has %d inline plots; want the sweep overlays and the CDFs", n)
	}
	if strings.Contains(string(html), "http://") || strings.Contains(string(html), "https://") {
		t.Error("comparison.html refers to something outside itself")
	}
}

// Row ids from the experiment are escaped in every medium.
func TestHostileRowIDEscaped(t *testing.T) {
	id := "x\x1b]0;pwned\x07|<img src=x>[a](http://e)"
	a := synthRun{name: "a", seed: 1, started: t0, rows: []synthRow{{id: id, n: 100, ttft: 40, tpot: 10}}}
	b := synthRun{name: "b", seed: 2, started: t0.Add(time.Hour), rows: []synthRow{{id: id, n: 100, ttft: 40, tpot: 20}}}
	c := pair(t, a, b)
	var term, md, gh, html bytes.Buffer
	c.WriteTerminal(&term)
	_ = c.WriteMarkdown(&md)
	_ = c.WriteGitHub(&gh)
	figs, err := c.Figures()
	if err != nil {
		t.Fatal(err)
	}
	_ = c.WriteHTML(&html, figs)
	if strings.ContainsAny(term.String(), "\x1b\x07") {
		t.Errorf("terminal output carries control characters: %q", term.String())
	}
	for name, s := range map[string]string{"md": md.String(), "github": gh.String()} {
		if strings.Contains(s, "<img") || strings.Contains(s, "](http") || strings.Contains(s, "\x1b") {
			t.Errorf("%s carries a tag, link or escape:\n%s", name, s)
		}
	}
	if strings.Contains(html.String(), "<img src=x>") {
		t.Error("comparison.html carries the row id's tag")
	}
}

// TestFalseAlarmRate measures how often two runs of the same distributions
// (A/A) are called a regression: the rate docs/comparison.md states. Each
// comparison judges twelve latency percentiles, the error and goodput
// ratios of a row of 400 requests; each metric alone is called a
// regression at most (1 − level) / 2 of the time, and the threshold cuts
// that further. IM_AA_PAIRS sets the number of pairs (default 20).
func TestFalseAlarmRate(t *testing.T) {
	if raceEnabled {
		t.Skip("computation only: make test runs it in its second pass, without the race detector, which slows it sixfold")
	}
	pairs := 20
	if v := os.Getenv("IM_AA_PAIRS"); v != "" {
		fmt.Sscan(v, &pairs)
	}
	if testing.Short() {
		pairs = 10
	}
	parent := t.TempDir()
	alarms, metricAlarms, judged, possible := 0, 0, 0, 0
	for i := range pairs {
		dir := filepath.Join(parent, fmt.Sprint(i))
		ra, rb := oneRow("a", uint64(2*i+1), t0, 10), oneRow("b", uint64(2*i+2), t0.Add(time.Hour), 10)
		// Varied lengths: every metric judged (see lockstep).
		ra.rows[0].inputStddev, rb.rows[0].inputStddev = 64, 64
		a, b := ra.write(t, dir), rb.write(t, dir)
		c, err := compareDirs(a, b, Options{Resamples: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if c.Verdict == VerdictRegression {
			alarms++
		}
		for _, m := range c.Rows[0].Metrics {
			if m.Verdict != NotJudged {
				judged++
				switch m.Verdict {
				case Regression:
					metricAlarms++
				case Possible:
					possible++
				}
			}
		}
	}
	rate := float64(alarms) / float64(pairs)
	t.Logf("A/A: %d of %d comparisons flagged a regression (%.1f%%); %d of %d judged metrics (%.2f%%); %d possible regressions (%.2f%% of metrics)",
		alarms, pairs, 100*rate, metricAlarms, judged, 100*float64(metricAlarms)/float64(judged), possible, 100*float64(possible)/float64(judged))
	if per := float64(metricAlarms) / float64(judged); per > 0.025 {
		t.Errorf("per-metric false alarms %.2f%%; the level bounds them at 2.5%%", 100*per)
	}
	if rate > 0.25 {
		t.Errorf("A/A false-alarm rate %.0f%%; docs/comparison.md says about 5%%", 100*rate)
	}
}

// With trials on both sides, throughput is judged over the trials' figures;
// without, it is shown and not judged.
func TestThroughputJudgedOverTrials(t *testing.T) {
	a, b := oneRow("a", 1, t0, 10), oneRow("b", 2, t0.Add(time.Hour), 10)
	c := pair(t, a, b)
	if m := c.metricOf("chat", "throughput.output_tokens_per_s"); m.Verdict != NotJudged || !strings.Contains(m.Note, "repeated trials") {
		t.Errorf("without trials: %+v; want not judged", m)
	}
	a.rows[0].trialTput = []float64{1000, 1010, 990, 1005, 995}
	b.rows[0].trialTput = []float64{800, 810, 790, 805, 795}
	c = pair(t, a, b)
	m := c.metricOf("chat", "throughput.output_tokens_per_s")
	if m.Verdict != Regression || m.BaseN != 5 || !m.Worse {
		t.Errorf("with trials: %+v; want a regression over 5 trials", m)
	}
}

// TestLockstepLatencyIsAtMostPossible: a closed-loop row of equal lengths
// whose TTFT moved by half is a possible regression, not a regression (its
// users move in step, and one run cannot see which mode another lands on);
// with varied lengths the same change is a regression. TPOT is judged
// either way.
func TestLockstepLatencyIsAtMostPossible(t *testing.T) {
	for _, stddev := range []float64{0, 64} {
		a, b := oneRow("a", 1, t0, 10), oneRow("b", 2, t0.Add(time.Hour), 13)
		a.rows[0].inputStddev, b.rows[0].inputStddev = stddev, stddev
		b.rows[0].ttft = 60
		c := pair(t, a, b)
		m := c.metricOf("chat", "ttft.p50")
		want := Regression
		if stddev == 0 {
			want = Possible
		}
		if m.Verdict != want {
			t.Errorf("input stddev %g: ttft.p50 %s (%s); want %s", stddev, m.Verdict, m.Note, want)
		}
		if stddev == 0 && (!strings.Contains(m.Note, "equal lengths") || len(c.Possible) == 0) {
			t.Errorf("lockstep ttft.p50: note %q, %d possible regressions listed", m.Note, len(c.Possible))
		}
		if tp := c.metricOf("chat", "tpot.p50"); tp.Verdict != Regression {
			t.Errorf("input stddev %g: tpot.p50 %s; want a regression", stddev, tp.Verdict)
		}
	}
}
