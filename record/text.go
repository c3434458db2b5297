package record

import (
	"fmt"
	"sort"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// Values as the record writes them in prose and table cells, the same in
// decision.md, report.html and results.xlsx.

func FormatMap(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func SLOText(s metrics.SLO) string {
	var parts []string
	if s.TTFTms > 0 {
		parts = append(parts, fmt.Sprintf("TTFT ≤ %g ms", s.TTFTms))
	}
	if s.TPOTms > 0 {
		parts = append(parts, fmt.Sprintf("TPOT ≤ %g ms", s.TPOTms))
	}
	if s.ITLms > 0 {
		parts = append(parts, fmt.Sprintf("largest ITL ≤ %g ms", s.ITLms))
	}
	if s.E2Ems > 0 {
		parts = append(parts, fmt.Sprintf("E2E ≤ %g ms", s.E2Ems))
	}
	return strings.Join(parts, ", ")
}

func FormatValues(vs []verdict.Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Name + " = " + numfmt.Num(v.Value)
	}
	return strings.Join(parts, ", ")
}

func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// simTarget describes the built-in server in one line: what it simulates,
// which matters to a reader as much as a real server's GPU does.
func SimTarget(s schema.SimSettings) string {
	if s.Preset == schema.PresetFixed {
		return fmt.Sprintf("built-in simulator, fixed latencies (TTFT %s, ITL %s, max_model_len %d)", s.TTFT, s.ITL, s.MaxModelLen)
	}
	var extra []string
	if s.Replicas > 1 {
		extra = append(extra, fmt.Sprintf("%d replicas", s.Replicas))
	}
	if s.PhysicsOnly {
		extra = append(extra, "physics only")
	}
	if s.Personality != "" && s.Personality != "vllm" {
		extra = append(extra, s.Personality+" personality")
	}
	if len(s.Faults) > 0 {
		extra = append(extra, fmt.Sprintf("%d fault rules", len(s.Faults)))
	}
	extra = append(extra, fmt.Sprintf("max_model_len %d", s.MaxModelLen))
	out := fmt.Sprintf("built-in simulator, preset %s (%s; see docs/simulator.md)", s.Preset, strings.Join(extra, ", "))
	if c := s.Calibration; c != nil {
		out += "; " + CalibrationText(c)
	}
	return out
}

// CalibrationText says how far a calibrated preset's simulation is from
// the run it was fitted to, on the rows the fit held out (the honest
// figure: the fit never saw them), or on the fitted rows when none was
// held out. A reader of simulated figures needs it beside them: it is how
// much those figures can be trusted to stand for the measured server.
func CalibrationText(c *schema.Calibration) string {
	e, on := c.Error.HeldOut, "held-out rows"
	if len(c.HeldOutRows) == 0 {
		e, on = c.Error.Fitted, "the fitted rows (none held out)"
	}
	pct := func(v *float64) string {
		if v == nil {
			return "n/a"
		}
		return fmt.Sprintf("±%.1f%%", *v)
	}
	date := c.Date
	if len(date) >= 10 {
		date = date[:10]
	}
	what := "preset file " + c.File
	if c.File == "" {
		what = "a preset file"
	}
	return fmt.Sprintf("%s calibrated against %s (experiment %s) on %s: TTFT p50 %s, TPOT p50 %s, output tok/s %s on %s (docs/calibrate.md)",
		what, c.Source, c.Experiment, date, pct(e.TTFTP50), pct(e.TPOTP50), pct(e.OutputTPS), on)
}

// discoveredModels lists the models the server's /models answered with,
// each with its context limit when it gave one; "" when it listed none.
func DiscoveredModels(disc rundir.Discovered) string {
	ms := make([]string, 0, len(disc.Models))
	for _, md := range disc.Models {
		t := md.ID
		if md.MaxModelLen > 0 {
			t += fmt.Sprintf(" (max_model_len %d)", md.MaxModelLen)
		}
		ms = append(ms, t)
	}
	return strings.Join(ms, ", ")
}
