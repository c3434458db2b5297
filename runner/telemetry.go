package runner

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/telemetry"
)

// scrapePlan is where and how often a run's rows read telemetry: the
// server's metrics endpoints and any DCGM exporters.
type scrapePlan struct {
	targets  []telemetry.Target
	interval time.Duration
	// client is the scrapes' own, apart from the load's: a scrape never
	// waits for a connection the load holds, nor takes one from it, and
	// the load's connection counts stay the load's. It follows the load's
	// redirect policy.
	client *http.Client
	// clock, when set, is the virtual clock the scrapes are stamped with
	// and taken on (run --virtual): the row takes each round itself.
	clock func() time.Time
}

// newScrapePlan returns the run's scrape plan, or nil when telemetry is
// switched off. Server endpoints default to each server URL's root with
// /metrics; they carry the run's headers and API key, as a gateway in front
// of the server may want them. GPU exporters get none: they are another
// service, and the key is not theirs.
func newScrapePlan(p schema.TelemetryPlan, urls []string, apiKey string, headers map[string]string) *scrapePlan {
	if !p.Enabled {
		return nil
	}
	server := p.Metrics
	if len(server) == 0 {
		for _, u := range urls {
			if m := schema.ServerMetricsURL(u); !slices.Contains(server, m) {
				server = append(server, m)
			}
		}
	}
	h := mergeHeaders(headers, nil)
	if apiKey != "" {
		h["Authorization"] = "Bearer " + apiKey
	}
	sp := &scrapePlan{interval: p.Interval.D()}
	for _, u := range server {
		sp.targets = append(sp.targets, telemetry.Target{URL: u, Kind: telemetry.KindServer, Display: redact.URL(u), Headers: h})
	}
	for _, u := range p.GPU {
		sp.targets = append(sp.targets, telemetry.Target{URL: u, Kind: telemetry.KindGPU, Display: redact.URL(u)})
	}
	sp.client = protocol.NewHTTPClient(len(sp.targets) + 1)
	return sp
}

// close releases the scrapes' idle connections.
func (sp *scrapePlan) close() {
	if sp != nil {
		sp.client.CloseIdleConnections()
	}
}

// rowScrape is one row's (or trial's) telemetry: the scraper and the file
// its samples go to as they come.
type rowScrape struct {
	scraper *telemetry.Scraper
	w       *rundir.LineWriter
	mu      sync.Mutex
	werr    error
}

// startScrape opens rows/<files>/telemetry.jsonl and starts scraping with
// start as the clock's zero, the row's own, so that a sample's t_ns and a
// record's start_ns count from the same instant. The first scrape is taken
// before it returns, before the row's first request: the counters' increases
// over the row then cover every request of it. A nil plan scrapes nothing.
func (sp *scrapePlan) startScrape(ctx context.Context, dir *rundir.Dir, files string, start time.Time) (*rowScrape, error) {
	if sp == nil {
		return nil, nil
	}
	w, err := dir.CreateLines(rundir.RowFile(files, rundir.TelemetryFile))
	if err != nil {
		return nil, err
	}
	rs := &rowScrape{w: w}
	rs.scraper = telemetry.Start(ctx, telemetry.Options{
		Targets: sp.targets, Interval: sp.interval, Client: sp.client, Start: start,
		Clock: sp.clock, Manual: sp.clock != nil,
		Sink: func(s telemetry.Sample) error {
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if rs.werr == nil {
				rs.werr = w.Write(s)
			}
			return rs.werr
		},
	})
	return rs, nil
}

// phase marks the samples taken from now on; nil-safe.
func (rs *rowScrape) phase(p string) {
	if rs != nil {
		rs.scraper.SetPhase(p)
	}
}

// round takes a scrape round now (telemetry.Scraper.Round); nil-safe.
func (rs *rowScrape) round() {
	if rs != nil {
		rs.scraper.Round()
	}
}

// finish takes the row's last scrape, after its last request, closes the
// file and reduces the samples over the measured window. A failed write of
// the file is the run's error (the disk is the run's); a failed scrape is
// only a note in the figures.
//
// window is the measured window (start, end, and 1 when there is one).
func (rs *rowScrape) finish(window [3]int64, totals telemetry.RecordTotals, client *metrics.Metrics, interval time.Duration) (*metrics.ServerTelemetry, *metrics.GPUTelemetry, []metrics.TelemetryPoint, error) {
	if rs == nil {
		return nil, nil, nil, nil
	}
	rs.scraper.SetPhase(metrics.PhaseBetween)
	samples := rs.scraper.Stop()
	rs.mu.Lock()
	werr := rs.werr
	rs.mu.Unlock()
	if err := rs.w.Close(); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		werr = fmt.Errorf("telemetry: %w", werr)
	}
	in := telemetry.ReduceInput{Client: client, Records: &totals, Interval: interval}
	if window[2] == 1 {
		in.WindowStartNS, in.WindowEndNS = window[0], window[1]
	} else {
		// No measured request ended: no window, and no window figures;
		// the token check over the whole row still holds.
		in.WindowStartNS, in.WindowEndNS = 0, -1
	}
	server, gpu, points := telemetry.Reduce(samples, in)
	return server, gpu, points, werr
}

// recordTotals adds up the records for the token-counter check
// (telemetry.RecordTotals.Add), from the requests' goroutines.
type recordTotals struct {
	mu sync.Mutex
	t  telemetry.RecordTotals
}

func (rt *recordTotals) add(rec *metrics.Record) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.t.Add(rec)
}

func (rt *recordTotals) totals() telemetry.RecordTotals {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.t
}

// discoveredGPUs lists each GPU the rows' exporters named, once per GPU
// (by its id and source), for the manifest's discovered hardware.
func discoveredGPUs(rows []metrics.RowSummary) []string {
	seen := map[string]bool{}
	var out []string
	add := func(g *metrics.GPUTelemetry) {
		if g == nil {
			return
		}
		for _, d := range g.PerGPU {
			key := d.Source + "\x00" + d.ID + "\x00" + d.UUID
			if !seen[key] {
				seen[key] = true
				out = append(out, d.Model)
			}
		}
	}
	for i := range rows {
		add(rows[i].GPU)
		for j := range rows[i].Trials {
			add(rows[i].Trials[j].GPU)
		}
	}
	return out
}
