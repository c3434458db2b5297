package charts

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sort"

	"github.com/infermatrix/infermatrix/metrics"
	"gonum.org/v1/plot/plotter"
)

// Bounds on what the record-based plots keep and draw. A row's values are
// kept exactly up to keepValues and thinned evenly beyond (see sampler);
// a CDF is drawn through at most cdfPoints of its order statistics, which
// at 960 px is indistinguishable from every one of them; the scatter
// keeps about scatterPoints points over all its rows.
const (
	keepValues    = 1 << 20
	cdfPoints     = 2000
	scatterPoints = 4000
)

// sampler keeps a deterministic systematic sample of a stream: every
// value until it holds max, then every second, every fourth and so on.
// It is exact for streams shorter than max and never holds more, and the
// same stream always gives the same sample.
type sampler[T any] struct {
	max    int
	stride int
	seen   int
	vals   []T
}

func newSampler[T any](max int) *sampler[T] { return &sampler[T]{max: max, stride: 1} }

func (s *sampler[T]) add(v T) {
	s.seen++
	if (s.seen-1)%s.stride != 0 {
		return
	}
	s.vals = append(s.vals, v)
	if len(s.vals) >= s.max {
		kept := s.vals[:0]
		for i := 0; i < len(s.vals); i += 2 {
			kept = append(kept, s.vals[i])
		}
		clear(s.vals[len(kept):])
		s.vals = kept
		s.stride *= 2
	}
}

// rowRecords is what the record-based plots draw of one row, from its
// successful measured requests: the CDFs of TTFT and TPOT (ms, by
// infermatrix's definitions from each record's own stamps) and a sample
// of input length against TTFT. Each row's values are reduced to these
// as soon as it is read, so a run's many large rows are never all in
// memory.
type rowRecords struct {
	id         string
	ttft, tpot rowCDF
	inTTFT     *sampler[plotter.XY]
	// inFlight is how many of the row's requests, warmup included, were
	// between their start and their end at each of its telemetry scrapes,
	// indexed as RowSummary.Telemetry: the client's side of the server's
	// running and waiting counts. Nil when the row has no telemetry, or
	// its records are several trials', each on a clock of its own.
	inFlight []float64
	// window is the measured window on the row's clock, in seconds, as
	// the summary counts it (first measured dispatch to last measured
	// end); ok is false when no measured request was read.
	window struct {
		first, last float64
		ok          bool
	}
}

// rowCDF is one metric's empirical CDF for a row (see ecdf), with the
// number of requests it describes.
type rowCDF struct {
	n     int
	xys   plotter.XYs
	exact bool
}

func newRowCDF(s *sampler[float64]) rowCDF {
	xys, exact := ecdf(s.vals)
	return rowCDF{n: s.seen, xys: xys, exact: exact && s.stride == 1}
}

// readRowRecords streams each row's records once. A row whose records
// file does not exist (it never ran, or was run elsewhere) has none;
// any other failure to read is an error.
func readRowRecords(in *Input, ids []string) ([]*rowRecords, error) {
	if in.Records == nil {
		return nil, nil
	}
	perRow := max(200, scatterPoints/max(1, min(len(ids), maxSeries)))
	var out []*rowRecords
	for _, id := range ids {
		rr := &rowRecords{id: id, inTTFT: newSampler[plotter.XY](perRow)}
		ttft, tpot := newSampler[float64](keepValues), newSampler[float64](keepValues)
		var inFlight *scrapeInFlight
		if in.Summary != nil {
			if rs := in.Summary.Row(id); rs != nil && len(rs.Telemetry) > 0 && len(rs.Trials) == 0 {
				inFlight = newScrapeInFlight(rs.Telemetry)
			}
		}
		var first, last int64
		measured := false
		err := in.Records(id, func(r *metrics.Record) error {
			if inFlight != nil && r.EndNS > 0 {
				inFlight.add(r.StartNS, r.StartNS+r.EndNS)
			}
			if !r.Warmup {
				dispatch, end := r.StartNS-r.QueueNS, r.StartNS+r.EndNS
				if !measured {
					first, last = dispatch, end
				}
				first, last, measured = min(first, dispatch), max(last, end), true
			}
			if r.Warmup || !r.OK() {
				return nil
			}
			if r.Stream && r.FirstTokenNS > 0 {
				v := float64(r.FirstTokenNS) / 1e6
				ttft.add(v)
				if n := r.InputTokens.Count(); n > 0 {
					rr.inTTFT.add(plotter.XY{X: float64(n), Y: v})
				}
			}
			if v, ok := r.TPOTms(); ok && v > 0 {
				tpot.add(v)
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", id, err)
		}
		rr.ttft, rr.tpot = newRowCDF(ttft), newRowCDF(tpot)
		if inFlight != nil {
			rr.inFlight = inFlight.counts()
		}
		if measured && last > first {
			rr.window.first, rr.window.last, rr.window.ok = float64(first)/1e9, float64(last)/1e9, true
		}
		out = append(out, rr)
	}
	return out, nil
}

// scrapeInFlight counts the requests in flight at each scrape instant
// as the records stream past: each request adds one over the scrapes in
// [start, end), marked at both ends of a difference array, so a row of a
// million requests costs a binary search each and no memory per request.
type scrapeInFlight struct {
	n     int     // scrapes in the row's list
	times []int64 // the timed scrapes' instants in ns, ascending
	order []int   // times[k] is the scrape order[k] of the row's list
	diff  []int
}

func newScrapeInFlight(pts []metrics.TelemetryPoint) *scrapeInFlight {
	s := &scrapeInFlight{n: len(pts)}
	for i, p := range pts {
		if isFinite(p.TS) {
			s.order = append(s.order, i)
		}
	}
	sort.SliceStable(s.order, func(a, b int) bool { return pts[s.order[a]].TS < pts[s.order[b]].TS })
	s.times = make([]int64, len(s.order))
	for k, i := range s.order {
		s.times[k] = int64(math.Round(pts[i].TS * 1e9))
	}
	s.diff = make([]int, len(s.times)+1)
	return s
}

// add counts a request in flight from start to end, in ns on the row's
// clock.
func (s *scrapeInFlight) add(start, end int64) {
	lo, _ := slices.BinarySearch(s.times, start)
	hi, _ := slices.BinarySearch(s.times, end)
	if hi > lo {
		s.diff[lo]++
		s.diff[hi]--
	}
}

// counts returns the count at each scrape of the row's list, NaN where
// the scrape has no time.
func (s *scrapeInFlight) counts() []float64 {
	out := make([]float64, s.n)
	for i := range out {
		out[i] = math.NaN()
	}
	n := 0
	for k, i := range s.order {
		n += s.diff[k]
		out[i] = float64(n)
	}
	return out
}

// ecdf returns the empirical CDF of vals (which it sorts) as points
// (value, percent of values at or below it), through at most cdfPoints
// evenly spaced order statistics, the smallest and largest included, and
// whether every value is there (so the curve should be drawn as steps).
func ecdf(vals []float64) (plotter.XYs, bool) {
	vals = finite(vals)
	n := len(vals)
	if n == 0 {
		return nil, false
	}
	sort.Float64s(vals)
	if n <= cdfPoints {
		xys := make(plotter.XYs, 0, n+1)
		xys = append(xys, plotter.XY{X: vals[0], Y: 0})
		for i, v := range vals {
			xys = append(xys, plotter.XY{X: v, Y: 100 * float64(i+1) / float64(n)})
		}
		return xys, true
	}
	xys := make(plotter.XYs, 0, cdfPoints)
	for k := range cdfPoints {
		i := int(math.Round(float64(k) * float64(n-1) / float64(cdfPoints-1)))
		xys = append(xys, plotter.XY{X: vals[i], Y: 100 * float64(i+1) / float64(n)})
	}
	return xys, false
}

// finite drops NaN and infinite values, which gonum/plot refuses.
func finite(vals []float64) []float64 {
	out := vals[:0:0]
	for _, v := range vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

func isFinite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// paretoFrontier returns the indices of the points no other point beats
// on both axes (higher is better on both), in increasing x.
func paretoFrontier(xys plotter.XYs) []int {
	idx := make([]int, len(xys))
	for i := range idx {
		idx[i] = i
	}
	// Highest x first; among equal x, highest y first, then input order.
	sort.SliceStable(idx, func(a, b int) bool {
		pa, pb := xys[idx[a]], xys[idx[b]]
		if pa.X != pb.X {
			return pa.X > pb.X
		}
		return pa.Y > pb.Y
	})
	var front []int
	best := math.Inf(-1)
	for _, i := range idx {
		if xys[i].Y > best {
			front = append(front, i)
			best = xys[i].Y
		}
	}
	slices.Reverse(front)
	return front
}

// pickEvenly returns n indices of 0..total-1, evenly spaced with the
// first and last included, or all of them when total <= n.
func pickEvenly(total, n int) []int {
	if total <= n {
		out := make([]int, total)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, n)
	for k := range n {
		i := int(math.Round(float64(k) * float64(total-1) / float64(n-1)))
		if len(out) == 0 || out[len(out)-1] != i {
			out = append(out, i)
		}
	}
	return out
}

// measuredRows returns the summaries of the rows that ran, in plan
// order.
func measuredRows(s *metrics.Summary) []*metrics.RowSummary {
	if s == nil {
		return nil
	}
	var out []*metrics.RowSummary
	for i := range s.Rows {
		if s.Rows[i].Status != metrics.RowNotRun {
			out = append(out, &s.Rows[i])
		}
	}
	return out
}
