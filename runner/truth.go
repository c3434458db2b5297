package runner

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// truthLine is the part of a ground-truth line (sim's truthRecord) the
// stamp check reads.
type truthLine struct {
	ID            string  `json:"id"`
	ArrivalUnixNs int64   `json:"arrival_unix_ns"`
	WriteNs       []int64 `json:"write_ns"`
	FlushNs       []int64 `json:"flush_ns"`
}

// stampErrors returns, for every text event of a record, how far in ms the
// client's stamp fell outside the server's write of the event's first
// token: 0 inside [write began, write returned], positive after (the
// client read late) and negative before (impossible on one clock: a stamp
// that is not of the read). Events and tokens are matched through
// EventTokens; ok is false when they cannot be (the counts disagree).
func stampErrors(tl truthLine, rec *metrics.Record) (out []float64, ok bool) {
	tok := 0
	for i, e := range rec.Events {
		if tok >= len(tl.FlushNs) {
			return nil, false
		}
		at := rec.StartUnixNS + e
		lo, hi := tl.ArrivalUnixNs+tl.FlushNs[tok], tl.ArrivalUnixNs+tl.FlushNs[tok]
		if tok < len(tl.WriteNs) {
			lo = tl.ArrivalUnixNs + tl.WriteNs[tok]
		}
		var d float64
		switch {
		case at > hi:
			d = float64(at-hi) / 1e6
		case at < lo:
			d = float64(at-lo) / 1e6
		}
		out = append(out, d)
		n := 1
		if len(rec.EventTokens) == len(rec.Events) {
			n = max(int(rec.EventTokens[i]), 1)
		}
		tok += n
	}
	return out, true
}

// truthCollector gathers one row's ground-truth lines and the records
// they belong to, to compute the row's stamp error when it ends.
type truthCollector struct {
	mu    sync.Mutex
	lines map[string]truthLine
	recs  []*metrics.Record
}

func (c *truthCollector) line(p []byte) {
	var tl truthLine
	if json.Unmarshal(p, &tl) != nil || tl.ID == "" {
		return
	}
	c.mu.Lock()
	c.lines[tl.ID] = tl
	c.mu.Unlock()
}

func (c *truthCollector) record(r *metrics.Record) {
	if r.OK() && !r.Warmup && r.Stream && r.ResponseID != "" && len(r.Events) > 0 {
		c.mu.Lock()
		c.recs = append(c.recs, r)
		c.mu.Unlock()
	}
}

// p99 waits briefly for the server's last lines (it writes a request's
// line after its last bytes, when the client may already have read them),
// then returns the p99 of the absolute stamp errors in ns and how many
// stamps it rests on.
func (c *truthCollector) p99() (float64, int) {
	deadline := time.Now().Add(200 * time.Millisecond)
	for {
		c.mu.Lock()
		missing := 0
		for _, r := range c.recs {
			if _, ok := c.lines[r.ResponseID]; !ok {
				missing++
			}
		}
		c.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []float64
	for _, r := range c.recs {
		tl, ok := c.lines[r.ResponseID]
		if !ok {
			continue
		}
		errs, ok := stampErrors(tl, r)
		if !ok {
			continue
		}
		for _, e := range errs {
			all = append(all, max(e, -e))
		}
	}
	if len(all) == 0 {
		return 0, 0
	}
	slices.Sort(all)
	return 1e6 * all[min(len(all)-1, len(all)*99/100)], len(all)
}
