package reports

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// assumedTPOT and assumedTTFT stand in for a remote server's speed when
// estimating how long a closed-loop row takes: a mid-sized model on one
// modern GPU. The plan marks estimates resting on them.
const (
	assumedTTFT = 200 * time.Millisecond
	assumedTPOT = 30 * time.Millisecond
)

// WritePlan prints the expanded rows of a plan with request counts and an
// estimated duration, for `infermatrix plan`.
func WritePlan(w io.Writer, p *schema.Plan) error {
	fmt.Fprintf(w, "%s: %d row%s\n\n", p.Experiment.Name, len(p.Rows), numfmt.Plural(len(p.Rows)))
	writePlanVariants(w, p) // reports/variants.go
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tLOAD\tINPUT\tOUTPUT\tREQUESTS\tSTOP\tEST. DURATION\t")
	var total time.Duration
	var assumed bool
	totalReqs, unbounded := 0, 0
	for i := range p.Rows {
		r := &p.Rows[i]
		per := requestLatency(p, r)
		est := schema.EstimateRow(r, per.Duration)
		total += est.Duration
		mark := ""
		if est.Assumed && per.Assumed {
			mark, assumed = "~", true
		}
		reqs := "—"
		load := r.LoadString()
		if n := r.TotalRequests(); n > 0 && r.Search != nil {
			// A search row runs up to its worst-case number of probes.
			probes := r.WorstCaseProbes()
			load = fmt.Sprintf("%s, ≤%d probes", r.Search, probes)
			reqs = fmt.Sprintf("≤%d", n*probes)
			totalReqs += n * probes
		} else if n > 0 {
			reqs = fmt.Sprint(n)
			totalReqs += n
		} else {
			unbounded++
			if r.Search != nil {
				load = fmt.Sprintf("%s, ≤%d probes", r.Search, r.WorstCaseProbes())
			}
		}
		dur := est.Duration.Round(time.Second).String()
		if est.Duration == 0 && r.Trace != nil {
			// The plan does not read data files; the trace's timestamps
			// decide how long the row runs.
			dur = "the trace's span"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s%s\t\n", r.ID, load, inputText(p, r), r.Output, reqs, r.Stop(), mark, dur)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	switch {
	case unbounded == len(p.Rows):
		fmt.Fprintf(w, "\nabout %s in all", total.Round(time.Second))
	case unbounded > 0:
		fmt.Fprintf(w, "\n%d requests plus %d row%s bounded by time, about %s in all", totalReqs, unbounded, numfmt.Plural(unbounded), total.Round(time.Second))
	default:
		fmt.Fprintf(w, "\n%d requests, about %s in all", totalReqs, total.Round(time.Second))
	}
	if assumed {
		fmt.Fprintf(w, "\n~ assumes %s to first token and %s per output token; the real figure depends on the server", assumedTTFT, assumedTPOT)
	}
	fmt.Fprintf(w, "\n%s", telemetryPlan(p))
	_, err := fmt.Fprintln(w)
	return err
}

// telemetryPlan says what each row will scrape, so that a reviewer sees
// before the run where server.* and gpu.* will come from, or that they
// will not.
func telemetryPlan(p *schema.Plan) string {
	t := p.Telemetry
	if !t.Enabled {
		return "telemetry: off (no server.* or gpu.* figures)"
	}
	if p.Server.Builtin && len(t.Metrics) == 0 && len(t.GPU) == 0 {
		return fmt.Sprintf("telemetry: every %s from the built-in server's /metrics, its simulated GPUs included", t.Interval)
	}
	server := "the server's own /metrics"
	switch {
	case len(t.Metrics) > 0:
		server = strings.Join(redactAll(t.Metrics), ", ")
	case !p.Server.Builtin:
		var urls []string
		for _, u := range p.Server.URLs {
			urls = append(urls, schema.ServerMetricsURL(u))
		}
		server = strings.Join(redactAll(slices.Compact(urls)), ", ")
	}
	gpu := "no DCGM exporter (gpu.* only where the server serves DCGM names itself)"
	if len(t.GPU) > 0 {
		gpu = "DCGM " + strings.Join(redactAll(t.GPU), ", ")
	}
	return fmt.Sprintf("telemetry: every %s from %s; %s", t.Interval, server, gpu)
}

func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = redact.URL(u)
	}
	return out
}

// requestLatency is the expected latency of one request of the row: the
// built-in server's unloaded latency, which the plan's settings determine
// (load only adds to it), and assumed otherwise.
func requestLatency(p *schema.Plan, r *schema.PlannedRow) schema.Estimate {
	out := time.Duration(max(r.Output.Mean, 1))
	in := max(r.Input.Mean, 1)
	if metrics.IsPooling(p.RowAPI(r)) {
		// A pooling request is one prefill of all its inputs.
		in = pooledTokens(r)
	}
	builtin, sim := p.Server.Builtin, p.Server.Sim
	if v := p.Variant(r.Variant); v != nil {
		builtin, sim = v.Builtin, v.Sim // the variant's own server
	}
	if builtin {
		ttft, tpot, err := sim.Unloaded(in, int(out))
		if err == nil {
			return schema.Estimate{Duration: ttft + (out-1)*tpot}
		}
	}
	return schema.Estimate{Duration: assumedTTFT + (out-1)*assumedTPOT, Assumed: true}
}
