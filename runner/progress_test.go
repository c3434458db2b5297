package runner

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// TestProgressBar checks the live bar's content: the fraction of requests
// done, the count, live TTFT percentiles and errors; and that a duration row
// fills by time.
func TestProgressBar(t *testing.T) {
	var out strings.Builder
	p := newProgress(&schema.PlannedRow{ID: "chat", Requests: 4}, func(string, ...any) {}, &out)
	p.start = time.Now()
	p.add(&metrics.Record{FirstTokenNS: 10e6, EndNS: 20e6})
	p.add(&metrics.Record{Error: &metrics.Error{Class: metrics.ErrHTTP}})
	line := p.barLine(p.start.Add(1500 * time.Millisecond))
	for _, want := range []string{"chat [" + strings.Repeat("█", 8) + strings.Repeat("·", 8) + "] 2/4", "TTFT p50/p95 10.0/10.0 ms", "err 1", "2s"} {
		if !strings.Contains(line, want) {
			t.Errorf("bar %q lacks %q", line, want)
		}
	}
	d := schema.Duration(10 * time.Second)
	timed := newProgress(&schema.PlannedRow{ID: "soak", Duration: d}, func(string, ...any) {}, &out)
	timed.start = time.Now()
	if line := timed.barLine(timed.start.Add(5 * time.Second)); !strings.Contains(line, "["+strings.Repeat("█", 8)+strings.Repeat("·", 8)+"] 0 done") {
		t.Errorf("duration bar %q not half full", line)
	}
	long := newProgress(&schema.PlannedRow{ID: strings.Repeat("x", 100), Requests: 4}, func(string, ...any) {}, &out)
	long.start = time.Now()
	if got := fitWidth(long.barLine(long.start), 80); utf8.RuneCountInString(got) >= 80 {
		t.Errorf("bar of %d characters on an 80-column terminal", utf8.RuneCountInString(got))
	}
}
