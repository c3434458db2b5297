package reports

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

func TestMarkdown(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	sum.Rows[1].Errors.ByClass = map[string]int{metrics.ErrHTTP: 1}
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Second)
	man := &rundir.Manifest{
		Started: start, Ended: &end, Command: []string{"infermatrix", "run", "judged.yaml", "--out", "results/x", "--rows", "idle,busy"},
		Experiment: rundir.ExperimentInfo{Name: "judged", File: "judged.yaml", SHA256: plan.SHA256},
		Server:     rundir.ServerInfo{Declared: plan.Server},
	}
	var b bytes.Buffer
	in := &Input{Plan: plan, Manifest: man, Summary: sum, Decision: verdict.Judge(plan, sum)}
	if err := WriteMarkdown(&b, in); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"# Decision record: judged",
		"**Verdict: FAIL.** 2 of 3 valid judged rows fail acceptance: `busy`, `broken`. Also: with rules but not run: `gone`.",
		"| `busy` | latency | **fail**: `ttft.p95 < 100` with ttft.p95 = 375; `tpot.p95 < 40` with tpot.p95 = 50.3; `errors.total == 0` with errors.total = 1 |",
		"- `broken`: latency: no successful requests (3 sent, 3 failed)",
		"| `gone` | not run |",
		"| H2 | The missing row is fast.<br>`rows.gone.ttft.p95 < 1` | **inconclusive** | no data for row gone |",
		"| `idle` | 3 / 3 | 21.0 / 21.9 / 22.0 |",
		// --out is dropped: that directory now exists and a rerun must not reuse it.
		"```sh\ninfermatrix run judged.yaml --rows idle,busy\n```",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}
	// Sections in the order a reviewer reads them.
	last := -1
	for _, h := range []string{"## Hypotheses", "## Validity", "## Server and run", "## Workload matrix", "## Results", "## Acceptance", "## Rejected rows", "## Reproduce"} {
		i := strings.Index(md, h)
		if i < last {
			t.Errorf("section %q out of order", h)
		}
		last = i
	}
	// One line per row in each table.
	if n := strings.Count(md, "| `idle` |"); n != 3 {
		t.Errorf("idle appears in %d table rows; want 3 (matrix, results, acceptance)", n)
	}
}

func TestCellEscapesServerText(t *testing.T) {
	if got := cell("a|b\n<script>"); got != `a\|b &lt;script&gt;` {
		t.Errorf("cell = %q", got)
	}
	if got := code("a < b || c"); got != "`a < b \\|\\| c`" {
		t.Errorf("code = %q", got)
	}
}

func TestCSV(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	sum.Percentiles = []float64{50, 99.9}
	var b bytes.Buffer
	if err := WriteCSV(&b, sum, verdict.Judge(plan, sum)); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(sum.Rows) {
		t.Fatalf("%d records; want a header and one line per row", len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"row", "verdict", "ttft_ms_p95", "ttft_ms_p99.9", "tpot_ms_mean", "output_tokens_per_s", "goodput_ratio", "errors_total"} {
		if _, ok := col[h]; !ok {
			t.Errorf("no column %q", h)
		}
	}
	busy := recs[2]
	if busy[col["row"]] != "busy" || busy[col["verdict"]] != verdict.Fail || busy[col["ttft_ms_p95"]] != "375" {
		t.Errorf("busy line = %v", busy)
	}
	if broken := recs[3]; broken[col["ttft_ms_count"]] != "0" || broken[col["ttft_ms_p95"]] != "" {
		t.Errorf("broken line: count %q p95 %q; want 0 and empty", broken[col["ttft_ms_count"]], broken[col["ttft_ms_p95"]])
	}
}

// TestFailedRowInTheMatrix: a row that failed partway (its server went
// away mid-row) ran and measured something; the judge leaves it unjudged
// ("not run" in decision.json), and the matrix says it failed rather than
// that it never ran, in decision.md and report.html alike.
func TestFailedRowInTheMatrix(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	rs := sum.Row("busy")
	rs.Status, rs.Error = metrics.RowFailed, "server unreachable since 10:00:30 UTC: no connection succeeded for 2s; the row and the run stopped"
	d := verdict.Judge(plan, sum)
	if rv := d.Row("busy"); rv.Verdict != verdict.NotRun {
		t.Fatalf("busy: verdict %q; the judge leaves a failed row unjudged", rv.Verdict)
	}
	in := &Input{Plan: plan, Manifest: &rundir.Manifest{}, Summary: sum, Decision: d}
	var md, html bytes.Buffer
	if err := WriteMarkdown(&md, in); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, in, nil); err != nil {
		t.Fatal(err)
	}
	line := ""
	for _, l := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(l, "| `busy` |") {
			line = l // the matrix's line comes first
			break
		}
	}
	if !strings.HasSuffix(line, "| ❌ failed (not judged) | — |") {
		t.Errorf("decision.md's matrix line for a failed row:\n%s\nwant it marked failed, its validity —", line)
	}
	if !strings.Contains(html.String(), `<span class="badge fail">failed (not judged)</span>`) {
		t.Error("report.html's matrix does not mark the failed row failed")
	}
}
