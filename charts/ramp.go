package charts

import (
	"github.com/infermatrix/infermatrix/metrics"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"math"
)

// rampFigures draws each ramped row's steps (RowSummary.Steps): TTFT p50
// and p95 and TPOT p95 above output throughput, against the step's load,
// one point per step with samples. A ramp of one step, or none with
// samples, has no chart. An embeddings or rerank row, which generates no
// token, is drawn as E2E p95 and p50 above inputs per second.
func rampFigures(in *Input) []*figure {
	if in.Summary == nil {
		return nil
	}
	var out []*figure
	for i := range in.Summary.Rows {
		rs := &in.Summary.Rows[i]
		if f := rampFigure(rs, pooledRow(in, rs), in.Summary.SLO); f != nil {
			out = append(out, f)
		}
	}
	return out
}

func rampFigure(rs *metrics.RowSummary, pooled bool, slo metrics.SLO) *figure {
	if len(rs.Steps) < 2 {
		return nil
	}
	xLabel := "users (closed loop)"
	if rs.Steps[0].Concurrency == 0 {
		xLabel = "arrival rate (req/s)"
	}
	type stepSeries struct {
		label  string
		get    func(*metrics.StepSummary) (float64, bool)
		dashed bool
	}
	series := []stepSeries{
		{"TTFT p95", func(s *metrics.StepSummary) (float64, bool) {
			return s.Metrics.TTFT.P95, s.Metrics.TTFT.Count > 0
		}, false},
		{"TTFT p50", func(s *metrics.StepSummary) (float64, bool) {
			return s.Metrics.TTFT.P50, s.Metrics.TTFT.Count > 0
		}, true},
		{"TPOT p95", func(s *metrics.StepSummary) (float64, bool) {
			return s.Metrics.TPOT.P95, s.Metrics.TPOT.Count > 0
		}, false},
	}
	work, workLabel := func(t metrics.Throughput) float64 { return t.OutputTokensPerS }, "output tokens/s"
	if pooled {
		series = []stepSeries{
			{"E2E p95", func(s *metrics.StepSummary) (float64, bool) {
				return s.Metrics.E2E.P95, s.Metrics.E2E.Count > 0
			}, false},
			{"E2E p50", func(s *metrics.StepSummary) (float64, bool) {
				return s.Metrics.E2E.P50, s.Metrics.E2E.Count > 0
			}, true},
		}
		work, workLabel = func(t metrics.Throughput) float64 { return t.InputsPerS }, "inputs/s"
	}
	lat := newPanel("", "", "latency (ms)")
	var legend []legendItem
	top := 0.0
	for k, se := range series {
		var xys plotter.XYs
		for j := range rs.Steps {
			st := &rs.Steps[j]
			if v, ok := se.get(st); ok && isFinite(v, st.Load()) {
				xys = append(xys, plotter.XY{X: st.Load(), Y: v})
				top = math.Max(top, v)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, s := seriesLine(xys, seriesColor(k), seriesGlyph(k), se.dashed)
		lat.Add(l, s)
		legend = append(legend, legendItem{se.label, []plot.Thumbnailer{l, s}})
	}
	var tput plotter.XYs
	for j := range rs.Steps {
		st := &rs.Steps[j]
		if st.Requests.Completed > 0 && isFinite(work(st.Throughput), st.Load()) {
			tput = append(tput, plotter.XY{X: st.Load(), Y: work(st.Throughput)})
		}
	}
	if len(legend) == 0 && len(tput) == 0 {
		return nil
	}
	tp := newPanel("", xLabel, workLabel)
	if len(tput) > 0 {
		l, s := seriesLine(tput, seriesColor(3), seriesGlyph(3), false)
		tp.Add(l, s)
		legend = append(legend, legendItem{workLabel, []plot.Thumbnailer{l, s}})
	}
	// The SLOs the steps are judged against, where they fall near the
	// data (one far above would flatten it: it is named at the top).
	if !pooled && top > 0 {
		for _, l := range []struct {
			name string
			ms   float64
		}{{"TTFT", slo.TTFTms}, {"TPOT", slo.TPOTms}} {
			if l.ms <= 0 {
				continue
			}
			label := l.name + " SLO " + fmtNum(l.ms) + " ms"
			if l.ms <= 4*top {
				lat.Add(&hline{y: l.ms, style: lineStyle(sloColor, 1.2, 6, 3), label: label, color: sloColor})
			} else {
				lat.Add(&hline{y: top * 1.1, label: label + ": far above", color: sloColor})
			}
		}
	}
	lat.Y.Min, tp.Y.Min = 0, 0
	return &figure{
		name:        "ramp-" + fileSafe(rs.ID),
		title:       "Ramp: " + rs.ID,
		subtitle:    "One point per step, by the requests sent in it; throughput over the step's own duration. The load never drained between steps.",
		panels:      []*plot.Plot{lat, tp},
		stack:       true,
		height:      plotHeight * 3 / 2,
		legend:      legend,
		legendBelow: true,
	}
}
