package runner

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/validity"
	"golang.org/x/term"
)

// progressEvery is how often a running row reports off a terminal: plain
// lines, so that logs of CI runs read well.
const progressEvery = 5 * time.Second

// barEvery is how often a terminal's progress bar is redrawn.
const barEvery = 200 * time.Millisecond

// progress reports a row's advance: the row's plan when it starts, then
// either a bar redrawn in place (on a terminal) or periodic lines, with
// requests done, live TTFT percentiles and errors, and a closing line.
type progress struct {
	row *schema.PlannedRow
	// name is how lines name the row: its id, with the trial of a
	// repeated row ("chat trial 2/5").
	name string
	logf func(string, ...any)
	// bar, when set, is the terminal the live bar is drawn on.
	bar      io.Writer
	stopDraw chan struct{}
	drawn    sync.WaitGroup

	mu     sync.Mutex
	start  time.Time
	last   time.Time
	done   int
	errs   int
	recent []float64 // TTFTs of the last requests, for live percentiles
	// simulated, when set, is the row's time on the virtual clock so
	// far: the end line gives it beside the time it took to simulate.
	simulated func() time.Duration
}

const recentWindow = 512

func newProgress(row *schema.PlannedRow, logf func(string, ...any), bar io.Writer) *progress {
	return &progress{row: row, name: row.ID, logf: logf, bar: bar}
}

func (p *progress) begin() {
	p.start = time.Now()
	p.last = p.start
	r := p.row
	parts := []string{r.Stop(), r.LoadString()}
	switch {
	case r.Batch > 0:
		// An embeddings or rerank row: inputs per request, no output.
		in := fmt.Sprintf("%d inputs of %s tokens", r.Batch, r.Input)
		if r.Query != nil {
			in += fmt.Sprintf(" against a query of %s", r.Query)
		}
		parts = append(parts, in)
	case r.Input.Mean > 0 || len(r.Input.Values) > 0:
		parts = append(parts, fmt.Sprintf("%s→%s tokens", r.Input, r.Output))
	}
	p.logf("row %s: %s", p.name, strings.Join(parts, ", "))
	if p.bar != nil {
		p.stopDraw = make(chan struct{})
		p.drawn.Add(1)
		go p.drawLoop()
	}
}

func (p *progress) drawLoop() {
	defer p.drawn.Done()
	t := time.NewTicker(barEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stopDraw:
			fmt.Fprint(p.bar, "\r\x1b[K") // clear the bar for the closing line
			return
		case <-t.C:
			p.mu.Lock()
			line := fitWidth(p.barLine(time.Now()), termWidth(p.bar))
			p.mu.Unlock()
			fmt.Fprint(p.bar, "\r\x1b[K"+line)
		}
	}
}

// termWidth is the width of the terminal w writes to, asked of the terminal
// itself on every redraw (so a resized window is followed), else COLUMNS,
// else 80. Shells do not export COLUMNS, so it is only a fallback. A bar
// wider than the terminal wraps, and redrawing it with a carriage return
// would then leave a stale line behind on every tick.
func termWidth(w io.Writer) int {
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		if n, _, err := term.GetSize(int(f.Fd())); err == nil && n > 20 {
			return n
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 20 {
		return n
	}
	return 80
}

// fitWidth cuts line to fewer than width characters.
func fitWidth(line string, width int) string {
	if utf8.RuneCountInString(line) < width {
		return line
	}
	r := []rune(line)
	return string(r[:width-2]) + "…"
}

// barLine renders the live bar: how far the row is (by requests, or by time
// for a duration row), with counts and live TTFT percentiles. p.mu is held.
func (p *progress) barLine(now time.Time) string {
	const width = 16
	elapsed := now.Sub(p.start)
	frac, count := -1.0, fmt.Sprintf("%d done", p.done)
	switch r := p.row; {
	case r.Requests > 0:
		frac = float64(p.done) / float64(r.Requests)
		count = fmt.Sprintf("%d/%d", p.done, r.Requests)
	case r.Duration > 0:
		frac = elapsed.Seconds() / r.Duration.D().Seconds()
	}
	bar := strings.Repeat("·", width)
	if frac >= 0 {
		n := int(min(frac, 1) * width)
		bar = strings.Repeat("█", n) + strings.Repeat("·", width-n)
	}
	// The bar is written to the terminal directly, not through logf: the
	// row id is made safe here.
	line := fmt.Sprintf("  %s [%s] %s", textsafe.TerminalLine(p.name), bar, count)
	if p50, p95, ok := p.ttft(); ok {
		line += fmt.Sprintf("  TTFT p50/p95 %.1f/%.1f ms", p50, p95)
	}
	return line + fmt.Sprintf("  err %d  %.0fs", p.errs, elapsed.Seconds())
}

// ttft returns the live TTFT percentiles over the recent window. p.mu is
// held.
func (p *progress) ttft() (p50, p95 float64, ok bool) {
	if len(p.recent) == 0 {
		return 0, 0, false
	}
	s := append([]float64(nil), p.recent...)
	sort.Float64s(s)
	return s[len(s)/2], s[(len(s)*95)/100], true
}

func (p *progress) add(rec *metrics.Record) {
	if rec.Warmup {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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
	if now := time.Now(); p.bar == nil && now.Sub(p.last) >= progressEvery {
		p.last = now
		total := "?"
		if p.row.Requests > 0 {
			total = fmt.Sprint(p.row.Requests)
		}
		line := fmt.Sprintf("  %s: %d/%s done, %d errors", p.name, p.done, total, p.errs)
		if p50, p95, ok := p.ttft(); ok {
			line += fmt.Sprintf(", TTFT p50 %.1f ms p95 %.1f ms", p50, p95)
		}
		p.logf("%s", line)
	}
}

// stop ends the live bar, if any. It is safe to call more than once and
// before begin.
func (p *progress) stop() {
	if p.stopDraw != nil {
		close(p.stopDraw)
		p.drawn.Wait()
		p.stopDraw = nil
	}
}

func (p *progress) end(s *metrics.RowSummary, v validity.Verdict) {
	p.stop()
	line := fmt.Sprintf("  %s: %d ok, %d failed in %.1f s", p.name, s.Requests.Completed, s.Requests.Failed, time.Since(p.start).Seconds())
	if p.simulated != nil {
		line = fmt.Sprintf("  %s: %d ok, %d failed in %.1f s of virtual time (%.1f s to simulate)", p.name, s.Requests.Completed, s.Requests.Failed,
			p.simulated().Seconds(), time.Since(p.start).Seconds())
	}
	if m := s.Metrics; m.TTFT.Count > 0 {
		line += fmt.Sprintf("; TTFT p95 %.1f ms", m.TTFT.P95)
	}
	if m := s.Metrics; m.TPOT.Count > 0 {
		line += fmt.Sprintf(", TPOT p95 %.2f ms", m.TPOT.P95)
	}
	if t := s.Throughput; t.InputsPerS > 0 {
		// An embeddings or rerank row: no output, inputs instead.
		line += fmt.Sprintf("; E2E p95 %.1f ms, %.0f inputs/s, %.0f input tok/s", s.Metrics.E2E.P95, t.InputsPerS, t.InputTokensPerS)
	} else {
		line += fmt.Sprintf(", %.0f output tok/s", s.Throughput.OutputTokensPerS)
	}
	if s.Status == metrics.RowInterrupted {
		line += " (interrupted)"
	}
	p.logf("%s", line)
	for _, n := range s.SelfCheck.Notes {
		p.logf("  %s: warning: %s", p.name, n)
	}
	// Whether the row's figures can be trusted, said as it ends, so that
	// a long run's user can stop and fix the setup rather than wait for
	// the record.
	for _, r := range v.Reasons {
		p.logf("  %s: INVALID (%s): %s", p.name, r.Check, r.Message)
	}
}
