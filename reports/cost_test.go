package reports

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
)

// TestCostFromARun runs a priced experiment on the built-in server (declared
// on two GPUs at $2.50 each) and checks that every row's cost is
// the arithmetic of docs/metrics.md from its own throughputs to 1%, that
// rules on cost.* and on throughput per GPU are judged, that the record
// names the cheapest accepted row, and that a run whose summaries were
// lost is rebuilt with the same figures.
func TestCostFromARun(t *testing.T) {
	dir := t.TempDir()
	src := `apiVersion: infermatrix/v1
name: priced
server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}, hardware: {count: 2}}
cost: {usd_per_gpu_hour: 2.5}
defaults: {input_tokens: 32, output_tokens: 8, warmup: 2, requests: 12, body: {ignore_eos: true}}
rows:
  - {id: narrow, concurrency: 1}
  - {id: wide, concurrency: 4, repeat: 2}
validity: {ignore: [client_cpu, client_stall, bursts, simulator, stamp_error, load, steady_state, samples]}
acceptance:
  - {name: priced, expect: "cost.usd_per_million_output_tokens > 0 && cost.output_tokens_per_usd > 0 && throughput.output_tokens_per_s_per_gpu > 0"}
  - {name: never, rows: [narrow], expect: "cost.usd_per_million_total_tokens < 0"}
`
	run := runExperiment(t, dir, src)
	in, notes, err := judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if strings.Contains(n, "reproduce") {
			t.Errorf("note: %s", n)
		}
	}
	checkCost := func(rs *metrics.RowSummary) {
		t.Helper()
		c, tp := rs.Cost, rs.Throughput
		if c == nil || c.USDPerHour != 5 || c.GPUs != 2 {
			t.Fatalf("row %s: cost %+v; want $5/h over 2 GPUs", rs.ID, c)
		}
		for _, f := range []struct {
			name       string
			got        *float64
			got2, want float64
		}{
			{"usd_per_million_output_tokens", c.USDPerMillionOutputTokens, 0, 5 / (tp.OutputTokensPerS * 3600) * 1e6},
			{"usd_per_million_total_tokens", c.USDPerMillionTotalTokens, 0, 5 / (tp.TotalTokensPerS * 3600) * 1e6},
			{"output_tokens_per_usd", c.OutputTokensPerUSD, 0, tp.OutputTokensPerS * 3600 / 5},
			{"output_tokens_per_s_per_gpu", nil, tp.OutputTokensPerSPerGPU, tp.OutputTokensPerS / 2},
		} {
			got := f.got2
			if f.got != nil {
				got = *f.got
			} else if f.name != "output_tokens_per_s_per_gpu" {
				t.Errorf("row %s: %s absent", rs.ID, f.name)
				continue
			}
			if !(f.want > 0) || math.Abs(got-f.want) > 0.01*f.want {
				t.Errorf("row %s: %s = %v; want %v within 1%%", rs.ID, f.name, got, f.want)
			}
		}
	}
	for _, id := range []string{"narrow", "wide"} {
		checkCost(in.Summary.Row(id))
	}
	narrow, wide := in.Decision.Row("narrow"), in.Decision.Row("wide")
	if narrow == nil || wide == nil || len(narrow.Rules) != 2 || len(wide.Rules) != 1 {
		t.Fatalf("verdicts narrow %+v, wide %+v", narrow, wide)
	}
	if !narrow.Rules[0].Pass || narrow.Rules[1].Pass || !wide.Rules[0].Pass {
		t.Errorf("rules narrow %+v, wide %+v; want priced to pass and never to fail", narrow.Rules, wide.Rules)
	}
	md := markdownOf(t, in)
	for _, want := range []string{"## Cost", "| `narrow` | $5 (2 GPUs) | $", "The one accepted row, `wide`, costs $"} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, in, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), `<section id="cost">`) || !strings.Contains(h.String(), "<code>wide</code>, costs $") {
		t.Error("report.html lacks the Cost section and its ranking")
	}

	// Killed before the summaries: narrow rebuilt from its records, wide
	// pooled again from its trials' summaries, priced alike.
	for _, f := range []string{rundir.SummaryFile, rundir.RowFile("narrow", rundir.SummaryFile), rundir.RowFile("wide", rundir.SummaryFile)} {
		if err := os.Remove(filepath.Join(run, f)); err != nil {
			t.Fatal(err)
		}
	}
	in, _, err = judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"narrow", "wide"} {
		rs := in.Summary.Row(id)
		if id == "narrow" && !rs.Rebuilt {
			t.Errorf("row %s not rebuilt", id)
		}
		checkCost(rs)
	}
}
