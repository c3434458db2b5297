package charts

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

const pooledExperiment = `apiVersion: infermatrix/v1
name: pooled
server: {target: builtin}
defaults: {requests: 20, input_tokens: 128, output_tokens: 16}
rows:
  - {id: chat, concurrency: 1}
  - {id: chat_busy, concurrency: 8}
  - {id: emb, api: embeddings, batch: 8, sweep: {concurrency: [1, 4]}}
`

// pooledInput is a run of two chat rows beside an embeddings sweep, whose
// rows have E2E, inputs/s and input tokens/s but no TTFT, TPOT or output.
func pooledInput(t *testing.T) *Input {
	t.Helper()
	plan, err := schema.Parse("pooled.yaml", []byte(pooledExperiment), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dist := func(vs ...float64) metrics.Dist { return metrics.NewDist(vs, nil) }
	chat := func(id string, tpot, out float64) metrics.RowSummary {
		rs := metrics.RowSummary{ID: id, Base: id, Status: metrics.RowComplete}
		rs.Metrics.TTFT, rs.Metrics.TPOT, rs.Metrics.E2E = dist(30, 40), dist(tpot, tpot*1.1), dist(200, 260)
		rs.Throughput = metrics.Throughput{RequestsPerS: 3, OutputTokensPerS: out, OutputTokensPerSU: 1000 / tpot, InputTokensPerS: 400}
		return rs
	}
	emb := func(id string, e2e, inputs float64) metrics.RowSummary {
		rs := metrics.RowSummary{ID: id, Base: "emb", Status: metrics.RowComplete}
		rs.Metrics.E2E = dist(e2e, e2e*1.2)
		rs.Throughput = metrics.Throughput{RequestsPerS: inputs / 8, InputsPerS: inputs, InputTokensPerS: inputs * 128}
		for k := range 4 {
			rs.Timeslices.Slices = append(rs.Timeslices.Slices, metrics.Timeslice{StartS: float64(k), EndS: float64(k + 1),
				Completed: 5, RequestsPerS: 5})
		}
		rs.Timeslices.WidthS = 1
		return rs
	}
	sum := &metrics.Summary{Format: metrics.SummaryFormat, Experiment: "pooled", Semantics: metrics.SemInfermatrix,
		Rows: []metrics.RowSummary{chat("chat", 10, 100), chat("chat_busy", 25, 600), emb("emb/c=1", 20, 400), emb("emb/c=4", 45, 1300)}}
	return &Input{Plan: plan, Summary: sum, Analysis: &analysis.Analysis{Sweeps: []analysis.SweepAnalysis{
		{Base: "emb", Rows: []string{"emb/c=1", "emb/c=4"}, OperatingPoint: "emb/c=4"}}}}
}

// TestPooledRowsCharts: an embeddings sweep, which generates no token, is
// charted as E2E against inputs/s, never as TTFT or TPOT at 0 output
// tokens/s or not at all; the Pareto chart, drawn on output tokens/s,
// names the rows it leaves out; a pooled row's timeslices show requests/s,
// not a line at 0 output tokens/s.
func TestPooledRowsCharts(t *testing.T) {
	in := pooledInput(t)
	figs, err := plotFigures(in)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*figure{}
	for _, f := range figs {
		byName[f.name] = f
	}
	lt := byName["latency-throughput-emb"]
	if lt == nil {
		t.Fatalf("no latency-throughput chart for the embeddings sweep; figures %v", names(figs))
	}
	p, err := lt.render()
	if err != nil {
		t.Fatal(err)
	}
	txt := svgText(t, p.Name, p.SVG)
	for _, w := range []string{"throughput (inputs/s)", "E2E (ms)", "End-to-end latency", "c=1", "c=4 (operating point)", "no token"} {
		if !strings.Contains(txt, w) {
			t.Errorf("latency-throughput-emb lacks %q:\n%s", w, txt)
		}
	}
	for _, bad := range []string{"TTFT", "TPOT", "output throughput"} {
		if strings.Contains(txt, bad) {
			t.Errorf("latency-throughput-emb draws %s, which an embeddings row has not", bad)
		}
	}

	pareto := byName["pareto"]
	if pareto == nil {
		t.Fatalf("no Pareto chart for the two chat rows; figures %v", names(figs))
	}
	if !strings.Contains(pareto.note, "emb/c=1, emb/c=4 are not drawn") || !strings.Contains(pareto.note, "output tokens/s") {
		t.Errorf("Pareto note %q does not name the embeddings rows it leaves out", pareto.note)
	}

	ts := byName["timeslices-emb-c-4"]
	if ts == nil {
		t.Fatalf("no timeslice chart for emb/c=4; figures %v", names(figs))
	}
	p, err = ts.render()
	if err != nil {
		t.Fatal(err)
	}
	txt = svgText(t, p.Name, p.SVG)
	if !strings.Contains(txt, "requests/s") || strings.Contains(txt, "output tokens/s") || strings.Contains(txt, "TTFT (ms)") {
		t.Errorf("timeslices-emb-c-4 is not drawn on requests/s alone:\n%s", txt)
	}

	// A ramp of an embeddings row: E2E above inputs/s.
	rs := in.Summary.Row("emb/c=4")
	for k, c := range []int{1, 4} {
		st := metrics.StepSummary{Concurrency: c}
		st.Requests.Completed = 10
		st.Metrics.E2E = metrics.NewDist([]float64{20 * float64(k+1)}, nil)
		st.Throughput.InputsPerS = 400 * float64(k+1)
		rs.Steps = append(rs.Steps, st)
	}
	ramp := rampFigure(rs, true, metrics.SLO{})
	if ramp == nil || len(ramp.panels) != 2 || ramp.panels[1].Y.Label.Text != "inputs/s" || len(ramp.legend) != 3 || ramp.legend[0].label != "E2E p95" {
		t.Errorf("ramp of an embeddings row: %+v; want E2E p95, p50 above inputs/s", ramp)
	}
}

func names(figs []*figure) []string {
	var out []string
	for _, f := range figs {
		out = append(out, f.name)
	}
	return out
}
