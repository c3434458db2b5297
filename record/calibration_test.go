package record

import (
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/schema"
)

// TestSimTargetCalibration checks that the description of a simulated
// server run on a calibrated preset carries the calibration's error, on
// the held-out rows when there are some, where the record describes the
// server.
func TestSimTargetCalibration(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	s := schema.SimSettings{Preset: "llama-3.1-8b-h100", MaxModelLen: 8192, Calibration: &schema.Calibration{
		Source: "runs/vllm/20261127T120000Z", Experiment: "sweep", Date: "2026-11-27T12:30:00Z", File: "presets/twin.yaml",
		FittedRows: []string{"a", "c"}, HeldOutRows: []string{"b"},
		Error: schema.CalibrationError{
			Fitted:  schema.CalibrationErrors{TTFTP50: f(1), TPOTP50: f(1), OutputTPS: f(1)},
			HeldOut: schema.CalibrationErrors{TTFTP50: f(4.54), TPOTP50: f(2), OutputTPS: nil},
		},
	}}
	want := "preset file presets/twin.yaml calibrated against runs/vllm/20261127T120000Z (experiment sweep) on 2026-11-27: TTFT p50 ±4.5%, TPOT p50 ±2.0%, output tok/s n/a on held-out rows"
	if got := SimTarget(s); !strings.Contains(got, want) {
		t.Errorf("SimTarget:\n got %s\nwant it to contain %s", got, want)
	}
	s.Calibration.HeldOutRows = nil
	if got := SimTarget(s); !strings.Contains(got, "TTFT p50 ±1.0%, TPOT p50 ±1.0%, output tok/s ±1.0% on the fitted rows (none held out)") {
		t.Errorf("without held-out rows: %s", got)
	}
}
