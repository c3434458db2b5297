package engine

import (
	"testing"
	"time"
)

// BenchmarkVirtualClosedLoop runs 10 simulated seconds of the calibration
// workload at concurrency 200 on 8 replicas per op, and reports how many
// simulated tokens and seconds the virtual clock gets through per wall
// second: what makes a calibration run take a second instead of minutes.
func BenchmarkVirtualClosedLoop(b *testing.B) {
	p, _ := LookupPreset("qwen3-0.6b-h200")
	cfg := p.Config
	cfg.Replicas = 8
	var tokens float64
	for b.Loop() {
		r := closedLoop(b, cfg, 200, 1000, 500, 0, 10*time.Second)
		tokens += r.throughput * 10
	}
	b.ReportMetric(tokens/b.Elapsed().Seconds(), "sim-tokens/s")
	b.ReportMetric(float64(b.N)*10/b.Elapsed().Seconds(), "sim-s/s")
}
