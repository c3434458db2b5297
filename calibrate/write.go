package calibrate

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/infermatrix/infermatrix/schema"
)

// YAML writes the preset file: the keys server.sim.preset_file reads, and
// the calibration block, with comments saying what the figures mean. It is
// written by hand rather than marshalled so that unset keys stay out of the
// file (the override structs' zero values are not valid settings) and the
// file reads in the order a reviewer checks it.
func (r *Result) YAML() []byte {
	var b strings.Builder
	pf := r.Preset
	c := pf.Calibration
	fmt.Fprintf(&b, "# Simulator preset fitted by infermatrix calibrate (docs/calibrate.md).\n")
	fmt.Fprintf(&b, "# Use it with server: {target: builtin, sim: {preset_file: THIS FILE}}.\n")
	if r.Replicas > 0 {
		fmt.Fprintf(&b, "# The measured run had %d replicas: also set server.sim.replicas: %d.\n", r.Replicas, r.Replicas)
	}
	fmt.Fprintf(&b, "base: %s\n", pf.Base)
	b.WriteString("engine:\n")
	e := pf.Engine
	writeDur(&b, "step_overhead", e.StepOverhead)
	writeDur(&b, "seq_overhead", e.SeqOverhead)
	writeNum(&b, "bandwidth_efficiency", e.BandwidthEfficiency)
	writeNum(&b, "flops_efficiency", e.FLOPsEfficiency)
	writeNum(&b, "attention_efficiency", e.AttentionEfficiency)
	b.WriteString("front_end:\n")
	f := pf.FrontEnd
	writeDur(&b, "request_latency", f.RequestLatency)
	writeDur(&b, "request_cost", f.RequestCost)
	writeDur(&b, "request_cost_per_token", f.RequestCostPerToken)
	writeDur(&b, "token_cost", f.TokenCost)
	writeSigma(&b, "latency_spread", f.LatencySpread)
	if c == nil {
		return []byte(b.String())
	}
	b.WriteString("# How well this preset reproduces the run it was fitted to: per row, the\n")
	b.WriteString("# measured and simulated figure and the error in percent; per metric, the\n")
	b.WriteString("# largest absolute error over the fitted rows and over the held-out rows\n")
	b.WriteString("# (which the fit never saw: the honest figure).\n")
	b.WriteString("calibration:\n")
	fmt.Fprintf(&b, "  source: %s\n", quote(c.Source))
	fmt.Fprintf(&b, "  experiment: %s\n", quote(c.Experiment))
	if c.ExperimentSHA256 != "" {
		fmt.Fprintf(&b, "  experiment_sha256: %s\n", quote(c.ExperimentSHA256))
	}
	fmt.Fprintf(&b, "  base: %s\n", quote(c.Base))
	fmt.Fprintf(&b, "  date: %s\n", quote(c.Date))
	fmt.Fprintf(&b, "  tool: %s\n", quote(c.Tool))
	if c.Replicas > 0 {
		fmt.Fprintf(&b, "  replicas: %d\n", c.Replicas)
	}
	fmt.Fprintf(&b, "  fitted_rows: %s\n", list(c.FittedRows))
	fmt.Fprintf(&b, "  held_out_rows: %s\n", list(c.HeldOutRows))
	b.WriteString("  rows:\n")
	for _, row := range c.Rows {
		fmt.Fprintf(&b, "    - id: %s\n", quote(row.ID))
		if row.HeldOut {
			b.WriteString("      held_out: true\n")
		}
		for _, cell := range []struct {
			key string
			c   schema.CalibrationCell
		}{{"ttft_p50_ms", row.TTFTP50}, {"tpot_p50_ms", row.TPOTP50}, {"output_tok_s", row.OutputTPS}} {
			fmt.Fprintf(&b, "      %s: {measured: %s, simulated: %s, error_pct: %s}\n", cell.key, num(cell.c.Measured), num(cell.c.Simulated), num(cell.c.ErrorPct))
		}
	}
	b.WriteString("  error:\n")
	for _, g := range []struct {
		key string
		e   schema.CalibrationErrors
	}{{"fitted", c.Error.Fitted}, {"held_out", c.Error.HeldOut}} {
		fmt.Fprintf(&b, "    %s: {ttft_p50_pct: %s, tpot_p50_pct: %s, output_tok_s_pct: %s}\n", g.key, num(g.e.TTFTP50), num(g.e.TPOTP50), num(g.e.OutputTPS))
	}
	return []byte(b.String())
}

func writeDur(b *strings.Builder, key string, d *schema.Duration) {
	if d == nil {
		return
	}
	fmt.Fprintf(b, "  %s: %s\n", key, durText(d.D()))
}

// durText writes a duration as microseconds, which time.ParseDuration and
// the experiment format read back exactly: 2600us, 0.1us, 0s.
func durText(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return strconv.FormatFloat(float64(d)/1e3, 'f', -1, 64) + "us"
}

func writeSigma(b *strings.Builder, key string, v *float64) {
	if v == nil {
		return
	}
	fmt.Fprintf(b, "  %s: %s\n", key, strconv.FormatFloat(*v, 'f', -1, 64))
}

func writeNum(b *strings.Builder, key string, v float64) {
	if v == 0 {
		return
	}
	fmt.Fprintf(b, "  %s: %s\n", key, strconv.FormatFloat(v, 'f', -1, 64))
}

// num writes an absent figure as null, which the preset file reads back as
// absent.
func num(v *float64) string {
	if v == nil {
		return "null"
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

// quote writes a string as a YAML double-quoted scalar. Go's quoting of
// printable text is valid YAML; its \x escapes for bytes that are not UTF-8
// are too.
func quote(s string) string { return strconv.Quote(s) }

func list(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = quote(id)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Table writes the fit's figures for a terminal: every row, measured
// against simulated, and the summary errors.
func (r *Result) Table(w io.Writer) {
	c := r.Preset.Calibration
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tset\tTTFT p50 ms (meas/sim/err)\tTPOT p50 ms (meas/sim/err)\toutput tok/s (meas/sim/err)")
	for _, row := range c.Rows {
		set := "fitted"
		if row.HeldOut {
			set = "held out"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.ID, set, cellText(row.TTFTP50), cellText(row.TPOTP50), cellText(row.OutputTPS))
	}
	tw.Flush()
	for _, g := range []struct {
		name string
		e    schema.CalibrationErrors
	}{{"fitted rows", c.Error.Fitted}, {"held-out rows", c.Error.HeldOut}} {
		fmt.Fprintf(w, "largest error on %s: TTFT p50 %s, TPOT p50 %s, output tok/s %s\n", g.name, pct(g.e.TTFTP50), pct(g.e.TPOTP50), pct(g.e.OutputTPS))
	}
}

func cellText(c schema.CalibrationCell) string {
	if c.Measured == nil {
		return "—"
	}
	if c.Simulated == nil {
		return fmt.Sprintf("%.4g / — / —", *c.Measured)
	}
	return fmt.Sprintf("%.4g / %.4g / %+.1f%%", *c.Measured, *c.Simulated, *c.ErrorPct)
}

func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("±%.1f%%", *v)
}
