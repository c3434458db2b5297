package charts

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
)

// TestRampFigure: a ramped row gets a chart of its steps against their
// load; a row of one step, or without a ramp, gets none.
func TestRampFigure(t *testing.T) {
	step := func(users int, ttft float64) metrics.StepSummary {
		st := metrics.StepSummary{Step: users, Label: "c", Concurrency: users}
		st.Metrics.TTFT = metrics.NewDist([]float64{ttft, ttft + 1}, nil)
		st.Requests.Completed = 2
		st.Throughput.OutputTokensPerS = 100 * float64(users)
		return st
	}
	sum := &metrics.Summary{Rows: []metrics.RowSummary{
		{ID: "up", Steps: []metrics.StepSummary{step(1, 10), step(2, 20), step(3, 40)}},
		{ID: "one", Steps: []metrics.StepSummary{step(1, 10)}},
		{ID: "flat"},
	}, SLO: metrics.SLO{TTFTms: 30, TPOTms: 5000}}
	figs := rampFigures(&Input{Summary: sum})
	if len(figs) != 1 || figs[0].name != "ramp-up" || len(figs[0].panels) != 2 {
		t.Fatalf("figures %+v; want one, ramp-up, with two panels", figs)
	}
	p, err := figs[0].render()
	if err != nil || len(p.PNG) == 0 || len(p.SVG) == 0 {
		t.Errorf("render: %v (%d PNG bytes, %d SVG bytes)", err, len(p.PNG), len(p.SVG))
	}
	// The steps are judged against the SLO: the TTFT line is drawn, and
	// a TPOT SLO far above the data is named rather than flattening it.
	for _, want := range []string{"TTFT SLO 30 ms", "TPOT SLO 5000 ms: far above"} {
		if !strings.Contains(string(p.SVG), want) {
			t.Errorf("the ramp's SVG lacks %q", want)
		}
	}
}
