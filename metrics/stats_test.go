package metrics

import (
	"encoding/json"
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestPercentileMatchesNumpy checks the linear method against values numpy
// documents or that follow from its definition by hand.
func TestPercentileMatchesNumpy(t *testing.T) {
	tests := []struct {
		data []float64
		q    float64
		want float64
	}{
		// numpy.percentile docs: a = [[10, 7, 4], [3, 2, 1]], percentile(a, 50) == 3.5
		{[]float64{10, 7, 4, 3, 2, 1}, 50, 3.5},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 100, 4},
		// h = (n-1)q/100 = 3.6 → 4 + 0.6·(500-4)
		{[]float64{1, 2, 3, 4, 500}, 90, 301.6},
		{[]float64{1, 2, 3, 4, 500}, 99, 480.16},
		{[]float64{42}, 99, 42},
		{[]float64{1, 2}, 75, 1.75},
	}
	for _, tt := range tests {
		d := NewDist(append([]float64(nil), tt.data...), nil)
		got, err := d.Percentile(tt.q)
		if err != nil || !near(got, tt.want) {
			t.Errorf("Percentile(%v, %v) = %v, %v; want %v", tt.data, tt.q, got, err, tt.want)
		}
	}
}

func TestDistStatistics(t *testing.T) {
	d := NewDist([]float64{2, 4, 4, 4, 5, 5, 7, 9}, []float64{75, 99.9, 95})
	// The classic population-std example: mean 5, std exactly 2.
	if d.Count != 8 || d.Mean != 5 || d.Std != 2 || d.Min != 2 || d.Max != 9 {
		t.Errorf("Dist = %+v; want count 8 mean 5 std 2 min 2 max 9", d)
	}
	if !near(d.P50, 4.5) || !near(d.P95, 8.3) {
		t.Errorf("p50 %v p95 %v; want 4.5 and 8.3", d.P50, d.P95)
	}
	if len(d.Extra) != 2 || !near(d.Extra["p75"], 5.5) {
		t.Errorf("Extra = %v; want p75 = 5.5 and p99.9, and no duplicate of p95", d.Extra)
	}
}

func TestDistJSON(t *testing.T) {
	d := NewDist([]float64{1, 2, 3, 4}, []float64{99.9, 75})
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"count":4,"mean":2.5,"std":1.118034,"min":1,"max":4,"p50":2.5,"p90":3.7,"p95":3.85,"p99":3.97,"p75":3.25,"p99.9":3.997}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	var back Dist
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Count != 4 || back.P95 != 3.85 || back.Extra["p99.9"] != 3.997 {
		t.Errorf("round trip = %+v", back)
	}
	// Read back, raw samples are gone, but reported percentiles remain
	// available to p(metric, q); others are an error, not a guess.
	if v, err := back.Percentile(75); err != nil || v != 3.25 {
		t.Errorf("Percentile(75) after JSON = %v, %v; want 3.25", v, err)
	}
	if _, err := back.Percentile(80); err == nil {
		t.Error("Percentile(80) after JSON succeeded; want an error: the samples are not loaded")
	}
	empty, _ := json.Marshal(NewDist(nil, nil))
	if string(empty) != `{"count":0}` {
		t.Errorf("empty Dist = %s; want {\"count\":0}, not zeros that read as measurements", empty)
	}
}
