package engine

import (
	"math"
	"testing"
	"time"
)

// TestCalibrationQwen3H200 runs the published vLLM 0.11 measurement of
// Qwen3-0.6B on 8×H200 (ISL 1000, OSL 500, streaming chat, closed-loop
// concurrency 10 to 500) on the virtual clock and requires every figure
// within ±15%, and the fall from c=200 to c=500. docs/simulator.md says
// which preset parameters were fitted to this table.
func TestCalibrationQwen3H200(t *testing.T) {
	p, _ := LookupPreset("qwen3-0.6b-h200")
	cfg := p.Config
	cfg.Replicas = 8
	published := []struct {
		users      int
		throughput float64
	}{{10, 3045}, {50, 12890}, {100, 22521}, {200, 35999}, {500, 29836}}
	const publishedITL = 3.57 // ms, at c=100
	got := map[int]loadResult{}
	for _, row := range published {
		window := 60 * time.Second
		if testing.Short() || raceEnabled {
			window = 20 * time.Second
		}
		r := closedLoop(t, cfg, row.users, 1000, 500, 15*time.Second, window)
		got[row.users] = r
		dev := r.throughput/row.throughput - 1
		t.Logf("c=%-3d throughput %8.0f tok/s (published %5.0f, %+5.1f%%)  TTFT %7.1f ms  ITL %.2f ms  completed %d",
			row.users, r.throughput, row.throughput, 100*dev, ms(r.ttft), ms(r.itl), r.completed)
		if math.Abs(dev) > 0.15 {
			t.Errorf("c=%d: throughput %.0f tok/s is %+.1f%% from the published %.0f", row.users, r.throughput, 100*dev, row.throughput)
		}
	}
	if itl := ms(got[100].itl); math.Abs(itl/publishedITL-1) > 0.15 {
		t.Errorf("c=100: ITL %.2f ms, published %.2f ms", itl, publishedITL)
	}
	if got[500].throughput >= got[200].throughput {
		t.Errorf("throughput must fall from c=200 (%.0f) to c=500 (%.0f), as published", got[200].throughput, got[500].throughput)
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
