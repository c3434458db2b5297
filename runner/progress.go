package runner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// progressEvery is how often a running row reports. Plain lines, not a
// redrawn bar, so logs of CI runs read well.
const progressEvery = 5 * time.Second

// progress reports a row's advance as log lines: the row's plan when it
// starts, periodic counts with live TTFT percentiles, and a closing line.
type progress struct {
	row    *schema.PlannedRow
	logf   func(string, ...any)
	start  time.Time
	last   time.Time
	done   int
	errs   int
	recent []float64 // TTFTs of the last requests, for live percentiles
}

const recentWindow = 512

func newProgress(row *schema.PlannedRow, logf func(string, ...any)) *progress {
	return &progress{row: row, logf: logf}
}

func (p *progress) begin() {
	p.start = time.Now()
	p.last = p.start
	r := p.row
	parts := []string{r.Stop(), r.Load.String()}
	if r.Input.Mean > 0 || len(r.Input.Values) > 0 {
		parts = append(parts, fmt.Sprintf("%s→%s tokens", r.Input, r.Output))
	}
	p.logf("row %s: %s", r.ID, strings.Join(parts, ", "))
}

func (p *progress) add(rec *metrics.Record) {
	if rec.Warmup {
		return
	}
	p.done++
	if !rec.OK() {
		p.errs++
	} else if rec.FirstTokenNS > 0 {
		if len(p.recent) == recentWindow {
			copy(p.recent, p.recent[1:])
			p.recent = p.recent[:recentWindow-1]
		}
		p.recent = append(p.recent, float64(rec.FirstTokenNS)/1e6)
	}
	if now := time.Now(); now.Sub(p.last) >= progressEvery {
		p.last = now
		total := "?"
		if p.row.Requests > 0 {
			total = fmt.Sprint(p.row.Requests)
		}
		line := fmt.Sprintf("  %s: %d/%s done, %d errors", p.row.ID, p.done, total, p.errs)
		if len(p.recent) > 0 {
			s := append([]float64(nil), p.recent...)
			sort.Float64s(s)
			line += fmt.Sprintf(", TTFT p50 %.1f ms p95 %.1f ms", s[len(s)/2], s[(len(s)*95)/100])
		}
		p.logf("%s", line)
	}
}

func (p *progress) end(s *metrics.RowSummary) {
	line := fmt.Sprintf("  %s: %d ok, %d failed in %.1f s", s.ID, s.Requests.Completed, s.Requests.Failed, time.Since(p.start).Seconds())
	if m := s.Metrics; m.TTFT.Count > 0 {
		line += fmt.Sprintf("; TTFT p95 %.1f ms", m.TTFT.P95)
	}
	if m := s.Metrics; m.TPOT.Count > 0 {
		line += fmt.Sprintf(", TPOT p95 %.2f ms", m.TPOT.P95)
	}
	line += fmt.Sprintf(", %.0f output tok/s", s.Throughput.OutputTokensPerS)
	if s.Status == metrics.RowInterrupted {
		line += " (interrupted)"
	}
	p.logf("%s", line)
	for _, n := range s.SelfCheck.Notes {
		p.logf("  %s: warning: %s", s.ID, n)
	}
}
