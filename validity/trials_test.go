package validity

import (
	"slices"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// TestTrials: a repeated row is valid only if every trial is, a failed
// check names its trial, and the samples behind a judged percentile are
// the pooled ones: three trials of 40 TPOT samples each fall short of a
// p95's 72 alone, but pool to 120.
func TestTrials(t *testing.T) {
	ruled := rules(t, "tpot.p95 < 40")
	row, pooled := healthy()
	pooled.Metrics.TPOT = metrics.NewDist(slices.Repeat([]float64{7}, 120), nil)
	for k := 1; k <= 3; k++ {
		_, tr := healthy()
		tr.Trial = k
		tr.Metrics.TPOT = metrics.NewDist(slices.Repeat([]float64{7}, 40), nil)
		pooled.Trials = append(pooled.Trials, *tr)
	}
	in := Input{Row: row, Summary: pooled, Rules: ruled, Config: schema.DefaultValidity}
	if v := Row(in); !v.Valid {
		t.Fatalf("three healthy trials, 120 pooled samples: invalid %+v", v.Reasons)
	}
	if v := Trial(Input{Row: row, Summary: &pooled.Trials[0], Rules: ruled, Config: schema.DefaultValidity}); !v.Valid {
		t.Errorf("one trial alone is judged on its samples: %+v", v.Reasons)
	}
	pooled.Trials[1].SelfCheck.TimerLatenessP99MS = 7
	v := Row(in)
	if v.Valid || len(v.Reasons) != 1 || v.Reasons[0].Check != ClientStall || !strings.HasPrefix(v.Reasons[0].Message, "trial 2: ") {
		t.Errorf("trial 2 stalled: valid %v, reasons %+v; want one client_stall reason naming trial 2", v.Valid, v.Reasons)
	}
	pooled.Trials[1].SelfCheck.TimerLatenessP99MS = 0.3
	pooled.Metrics.TPOT = metrics.NewDist(slices.Repeat([]float64{7}, 60), nil)
	if v := Row(in); v.Valid || v.Reasons[0].Check != Samples {
		t.Errorf("60 pooled samples for a p95: valid %v, reasons %+v; want samples", v.Valid, v.Reasons)
	}
}
