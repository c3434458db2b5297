package telemetry

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// RecordTotals are the records' usage totals over the whole row, warmup and
// priming included, for the check of the server's token counters.
type RecordTotals struct {
	Prompt, Generation float64
	Requests           int
	// Unknown counts the requests without server usage (failed ones):
	// their tokens may or may not have been counted by the server.
	Unknown int
}

// ReduceInput is what Reduce needs beside the samples.
type ReduceInput struct {
	// WindowStartNS and WindowEndNS are the measured window on the
	// samples' clock.
	WindowStartNS, WindowEndNS int64
	// Client is the client's figures, for the gaps (client − server).
	Client *metrics.Metrics
	// Records is nil when there is nothing to check the counters with.
	Records  *RecordTotals
	Interval time.Duration
}

// The token check's tolerance: the server's counter may differ from the
// records by 1 % of the records' total or 8 tokens, whichever is more. A
// correct server counts exactly what it reports in usage; the slack covers
// a request that finished between the last scrape and the server's update
// of its counters, and nothing else.
const (
	TokenTolerance = 0.01
	TokenSlack     = 8
)

// MaxPoints bounds a row's telemetry series: a long row's scrape rounds are
// thinned evenly to this many points.
const MaxPoints = 1024

// targetData is one endpoint's samples, read.
type targetData struct {
	display  string
	kind     string
	mappings []string
	readings []*reading
	total    int
	failed   int
	firstErr string
}

// Reduce turns a row's samples into its server and GPU figures over the
// measured window and its telemetry series over the whole row.
//
// Gauges are summarised over the scrapes inside the window. Counters and
// histograms are read as their increase between the last scrape at or
// before the window's start and the first at or after its end, resets
// (a counter that went down) counted from zero. Several server targets are
// replicas: running and waiting requests and counters are summed per scrape
// round, KV usage averaged, histograms added. GPU metrics are found by name
// on any target. A failing endpoint is counted and noted, never an error.
func Reduce(samples []Sample, in ReduceInput) (*metrics.ServerTelemetry, *metrics.GPUTelemetry, []metrics.TelemetryPoint) {
	targets := group(samples)
	return reduceServer(targets, in), reduceGPU(targets, in), points(targets)
}

func group(samples []Sample) []*targetData {
	var order []*targetData
	byKey := map[[2]string]*targetData{}
	for i := range samples {
		s := &samples[i]
		k := [2]string{s.Kind, s.Target}
		td := byKey[k]
		if td == nil {
			td = &targetData{display: s.Target, kind: s.Kind}
			byKey[k] = td
			order = append(order, td)
		}
		td.total++
		if s.Error != "" {
			td.failed++
			if td.firstErr == "" {
				td.firstErr = s.Error
			}
			continue
		}
		if s.Mapping != "" && !slices.Contains(td.mappings, s.Mapping) {
			td.mappings = append(td.mappings, s.Mapping)
		}
		td.readings = append(td.readings, read(s))
	}
	for _, td := range order {
		slices.SortStableFunc(td.readings, func(a, b *reading) int { return cmp.Compare(a.t, b.t) })
	}
	return order
}

func inWindow(t int64, in ReduceInput) bool {
	return t >= in.WindowStartNS && t <= in.WindowEndNS
}

// notes collects a record's notes once each, in order.
type notes []string

func (n *notes) add(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	if !slices.Contains(*n, s) {
		*n = append(*n, s)
	}
}

func failureNote(n *notes, td *targetData) {
	switch {
	case td.failed == 0:
	case td.failed == td.total:
		n.add("%s: every scrape failed (%d), the first: %s", td.display, td.total, td.firstErr)
	default:
		n.add("%s: %d of %d scrapes failed, the first: %s", td.display, td.failed, td.total, td.firstErr)
	}
}

func reduceServer(targets []*targetData, in ReduceInput) *metrics.ServerTelemetry {
	var ts []*targetData
	for _, td := range targets {
		if td.kind == KindServer {
			ts = append(ts, td)
		}
	}
	if len(ts) == 0 {
		return nil
	}
	st := &metrics.ServerTelemetry{IntervalS: in.Interval.Seconds()}
	var n notes
	var mappingNames []string
	for _, td := range ts {
		st.Sources = append(st.Sources, td.display)
		st.Failed += td.failed
		failureNote(&n, td)
		engine := false
		for _, m := range td.mappings {
			if m == mappingDCGM {
				continue
			}
			engine = true
			if !slices.Contains(mappingNames, m) {
				mappingNames = append(mappingNames, m)
			}
		}
		if !engine && len(td.readings) > 0 {
			n.add("%s: no engine metrics recognised (vllm:*, sglang:*, tgi_*, llamacpp:*, trtllm_*, nv_trt_llm_*, NIM's): the server's figures are absent", td.display)
		}
		for _, r := range td.readings {
			if inWindow(r.t, in) {
				st.Scrapes++
			}
		}
	}
	st.Mapping = strings.Join(mappingNames, ",")

	if in.WindowEndNS > in.WindowStartNS {
		st.NumRequestsRunning = gauge(gaugeRounds(ts, qRunning, in))
		st.NumRequestsWaiting = gauge(gaugeRounds(ts, qWaiting, in))
		st.KVCacheUsage = gauge(gaugeRounds(ts, qKVUsage, in))
		win := func(q quantity) *float64 { return counterOver(ts, q, in, false, &n) }
		st.PrefixCacheQueries = win(qPrefixQueries)
		st.PrefixCacheHits = win(qPrefixHits)
		st.Preemptions = win(qPreemptions)
		st.PromptTokens = win(qPromptTokens)
		st.GenerationTokens = win(qGenerationTokens)
		if st.PrefixCacheQueries != nil && st.PrefixCacheHits != nil && *st.PrefixCacheQueries > 0 {
			st.PrefixCacheHitRate = ptr(*st.PrefixCacheHits / *st.PrefixCacheQueries)
		}
		h := func(q quantity) *metrics.ServerDist { return dist(histOver(ts, q, in, &n)) }
		st.TTFT = h(qTTFT)
		st.TPOT = h(qTPOT)
		st.ITL = h(qITL)
		st.E2E = h(qE2E)
		st.QueueTime = h(qQueue)
		FillGaps(st, in.Client)
	} else {
		n.add("no measured window: the window's figures are absent")
	}
	if in.Records != nil {
		st.Tokens = tokenCheck(ts, in.Records)
	}

	// What each engine does not publish, and where its figures mean
	// something else, once per mapping.
	for _, name := range mappingNames {
		m := mappingByName(name)
		if m == nil {
			continue
		}
		var missing []string
		for q := range numQuantities {
			if !anyReading(ts, name, func(r *reading) bool { return r.vals[q] != nil || r.hists[q] != nil }) {
				missing = append(missing, quantityInfo[q].name)
			}
		}
		if len(missing) > 0 {
			n.add("%s: not published: %s", name, strings.Join(missing, ", "))
		}
		for _, c := range m.Caveats {
			n.add("%s", c)
		}
	}
	st.Notes = n
	return st
}

// anyReading reports whether a reading of a target read with mapping
// satisfies f.
func anyReading(ts []*targetData, mapping string, f func(*reading) bool) bool {
	for _, td := range ts {
		if !slices.Contains(td.mappings, mapping) {
			continue
		}
		if slices.ContainsFunc(td.readings, f) {
			return true
		}
	}
	return false
}

// gaugeRounds gives a gauge's value per scrape round inside the window:
// summed over targets for a count, averaged for a ratio. A round in which
// a target that publishes the gauge did not answer is left out: a sum
// over part of the replicas would understate it.
func gaugeRounds(ts []*targetData, q quantity, in ReduceInput) []float64 {
	exp, published := expected(ts, hasVal(q), q)
	if !published {
		return nil
	}
	byRound := map[int][]float64{}
	for _, td := range exp {
		for _, r := range td.readings {
			if r.vals[q] != nil && inWindow(r.t, in) {
				byRound[r.round] = append(byRound[r.round], *r.vals[q])
			}
		}
	}
	return combineRounds(byRound, len(exp), quantityInfo[q].kind != kindRatio)
}

// combineRounds gives, in round order, each round's values summed (or
// averaged, when sum is false), leaving out a round with fewer than want
// values: one in which a replica or a GPU that publishes the figure did
// not answer, whose sum would understate it.
func combineRounds(byRound map[int][]float64, want int, sum bool) []float64 {
	rounds := make([]int, 0, len(byRound))
	for k := range byRound {
		rounds = append(rounds, k)
	}
	sort.Ints(rounds)
	var out []float64
	for _, k := range rounds {
		vs := byRound[k]
		if len(vs) != want {
			continue
		}
		var s float64
		for _, v := range vs {
			s += v
		}
		if !sum {
			s /= float64(len(vs))
		}
		out = append(out, s)
	}
	return out
}

func gauge(vs []float64) *metrics.Gauge {
	if len(vs) == 0 {
		return nil
	}
	g := &metrics.Gauge{Min: vs[0], Max: vs[0], Samples: len(vs)}
	var sum float64
	for _, v := range vs {
		sum += v
		g.Min = min(g.Min, v)
		g.Max = max(g.Max, v)
	}
	g.Mean = sum / float64(len(vs))
	return g
}

// tv is a counter's value at a scrape.
type tv struct {
	t int64
	v float64
}

// increase reads a counter's increase between the last scrape at or before
// the window's start and the first at or after its end (with whole, between
// the first and the last scrape). A value lower than the one before is a
// reset (the server restarted): the increase counts it from zero, as
// Prometheus' increase() does. late and early say how much of the window
// the scrapes do not cover; ok is false with fewer than two scrapes.
func increase(ps []tv, in ReduceInput, whole bool) (inc float64, resets int, late, early time.Duration, ok bool) {
	times := make([]int64, len(ps))
	for i, p := range ps {
		times[i] = p.t
	}
	base, end, late, early, ok := span(times, in, whole)
	if !ok {
		return 0, 0, 0, 0, false
	}
	for i := base + 1; i <= end; i++ {
		if ps[i].v < ps[i-1].v {
			resets++
			inc += ps[i].v
			continue
		}
		inc += ps[i].v - ps[i-1].v
	}
	return inc, resets, late, early, true
}

// span picks, among scrape times in order, the last at or before the
// window's start and the first at or after its end (with whole, the first
// and the last). When the scrapes do not reach that far it takes the
// nearest and says in late and early how much of the window is not
// covered. ok is false when fewer than two scrapes remain.
func span(times []int64, in ReduceInput, whole bool) (base, end int, late, early time.Duration, ok bool) {
	if len(times) < 2 {
		return 0, 0, 0, 0, false
	}
	base, end = 0, len(times)-1
	if !whole {
		base = -1
		for i, t := range times {
			if t <= in.WindowStartNS {
				base = i
			}
		}
		if base < 0 {
			base = 0
			late = time.Duration(times[0] - in.WindowStartNS)
		}
		end = -1
		for i, t := range times {
			if t >= in.WindowEndNS {
				end = i
				break
			}
		}
		if end < 0 {
			end = len(times) - 1
			early = time.Duration(in.WindowEndNS - times[end])
		}
	}
	if end <= base {
		return 0, 0, 0, 0, false
	}
	return base, end, late, early, true
}

// counterIncrease is one target's increase of a counter.
func counterIncrease(td *targetData, q quantity, in ReduceInput, whole bool, n *notes) (float64, bool) {
	var ps []tv
	family := ""
	for _, r := range td.readings {
		if r.vals[q] != nil {
			ps = append(ps, tv{r.t, *r.vals[q]})
			family = r.family[q]
		}
	}
	inc, resets, late, early, ok := increase(ps, in, whole)
	if !ok {
		return 0, false
	}
	windowNote(n, td.display, late, early)
	if resets > 0 {
		n.add("%s: %s went down between two scrapes (a restart?); counted from zero after it", td.display, family)
	}
	return inc, true
}

func windowNote(n *notes, display string, late, early time.Duration) {
	if late > 0 {
		n.add("%s: no scrape at or before the window's start: counters and histograms miss its first %s", display, roundDuration(late))
	}
	if early > 0 {
		n.add("%s: no scrape at or after the window's end: counters and histograms miss its last %s", display, roundDuration(early))
	}
}

func roundDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// expected lists the server targets a sum of q over replicas needs: those
// that published it, those that never answered, and those whose engine
// has a name for it but never published it. A sum missing one of them
// would describe part of the server only.
func expected(ts []*targetData, has func(*reading) bool, q quantity) (exp []*targetData, published bool) {
	for _, td := range ts {
		switch {
		case slices.ContainsFunc(td.readings, has):
			published = true
			exp = append(exp, td)
		case len(td.readings) == 0, publishesAny(td, q):
			exp = append(exp, td)
		}
	}
	return exp, published
}

func hasVal(q quantity) func(*reading) bool {
	return func(r *reading) bool { return r.vals[q] != nil }
}

func hasHist(q quantity) func(*reading) bool {
	return func(r *reading) bool { return r.hists[q] != nil }
}

// counterOver sums a counter's increase over the server targets; absent
// when a target it needs cannot give its increase.
func counterOver(ts []*targetData, q quantity, in ReduceInput, whole bool, n *notes) *float64 {
	exp, published := expected(ts, hasVal(q), q)
	if !published {
		return nil
	}
	var sum float64
	for _, td := range exp {
		inc, ok := counterIncrease(td, q, in, whole, n)
		if !ok {
			if len(td.readings) > 0 {
				n.add("%s: too few scrapes to read the increase of %s", td.display, quantityInfo[q].name)
			}
			return nil
		}
		sum += inc
	}
	return &sum
}

// publishesAny reports whether the target's engine has a name for q.
func publishesAny(td *targetData, q quantity) bool {
	for _, name := range td.mappings {
		if m := mappingByName(name); m != nil && len(m.sources[q]) > 0 {
			return true
		}
	}
	return false
}

// histIncrease is one target's increase of a histogram, bucket by bucket.
func histIncrease(td *targetData, q quantity, in ReduceInput, n *notes) *hist {
	var rs []*reading
	var times []int64
	for _, r := range td.readings {
		if r.hists[q] != nil {
			rs = append(rs, r)
			times = append(times, r.t)
		}
	}
	base, end, late, early, ok := span(times, in, false)
	if !ok {
		return nil
	}
	windowNote(n, td.display, late, early)
	last := rs[end].hists[q]
	acc := &hist{les: last.les, counts: make([]float64, len(last.les))}
	for i := base + 1; i <= end; i++ {
		prev, cur := rs[i-1].hists[q], rs[i].hists[q]
		if cur.count < prev.count {
			n.add("%s: %s went down between two scrapes (a restart?); counted from zero after it", td.display, rs[i].family[q])
			prev = &hist{les: cur.les, counts: make([]float64, len(cur.les))}
		}
		if !slices.Equal(cur.les, prev.les) || !slices.Equal(cur.les, acc.les) {
			n.add("%s: %s changed its buckets during the row: not read", td.display, rs[i].family[q])
			return nil
		}
		for j := range cur.counts {
			acc.counts[j] += max(cur.counts[j]-prev.counts[j], 0)
		}
		acc.sum += cur.sum - prev.sum
		acc.count += cur.count - prev.count
	}
	return acc
}

func histOver(ts []*targetData, q quantity, in ReduceInput, n *notes) *hist {
	exp, published := expected(ts, hasHist(q), q)
	if !published {
		return nil
	}
	var acc *hist
	for _, td := range exp {
		h := histIncrease(td, q, in, n)
		if h == nil {
			return nil
		}
		if acc == nil {
			acc = h
			continue
		}
		if acc = addHist(acc, h); acc == nil {
			n.add("the servers' %s histograms have different buckets: not added", quantityInfo[q].name)
			return nil
		}
	}
	return acc
}

// dist reads a histogram's increase (in seconds) as a distribution in ms.
// The +Inf bucket is left out of Buckets (JSON has no infinity): its count
// is Count.
func dist(h *hist) *metrics.ServerDist {
	if h == nil || h.count <= 0 {
		return nil
	}
	d := &metrics.ServerDist{
		Count: h.count,
		Mean:  h.sum / h.count * 1000,
		P50:   quantile(0.50, h.les, h.counts) * 1000,
		P90:   quantile(0.90, h.les, h.counts) * 1000,
		P95:   quantile(0.95, h.les, h.counts) * 1000,
		P99:   quantile(0.99, h.les, h.counts) * 1000,
	}
	for i, le := range h.les {
		if math.IsInf(le, 1) {
			break
		}
		d.Buckets = append(d.Buckets, metrics.Bucket{LeMS: le * 1000, Count: h.counts[i]})
	}
	if math.IsNaN(d.P50) {
		return nil
	}
	return d
}

// FillGaps sets a server's TTFT and TPOT gaps, the client's figure minus
// the server's: what the network, the HTTP stack and the client add. A gap
// is left absent when either side has no figure. Reduce calls it; a pooled
// row calls it with its pooled client figures.
func FillGaps(st *metrics.ServerTelemetry, client *metrics.Metrics) {
	if st == nil || client == nil {
		return
	}
	gap := func(c metrics.Dist, s *metrics.ServerDist) *metrics.Gap {
		if s == nil || c.Count == 0 {
			return nil
		}
		return &metrics.Gap{Mean: c.Mean - s.Mean, P50: c.P50 - s.P50, P95: c.P95 - s.P95}
	}
	st.TTFTGap = gap(client.TTFT, st.TTFT)
	st.TPOTGap = gap(client.TPOT, st.TPOT)
}

// tokenCheck compares the server's token counters over the whole row (its
// first to its last scrape) with the records' totals.
func tokenCheck(ts []*targetData, rec *RecordTotals) *metrics.CounterCheck {
	cc := &metrics.CounterCheck{}
	var n notes
	if rec.Unknown > 0 {
		n.add("%d of %d requests have no server usage (failed or canceled): the servers' counters cannot be checked against the records", rec.Unknown, rec.Requests)
	}
	check := func(q quantity, records float64, what string) metrics.CounterDiff {
		d := metrics.CounterDiff{Records: records}
		var scratch notes
		v := counterOver(ts, q, ReduceInput{}, true, &scratch)
		if v == nil {
			n.add("no %s counter over the whole row: not checked", what)
			return d
		}
		d.Server = *v
		// A counter that leaves part of the quantity out (an older
		// llama.cpp's prompt tokens without those it reused) is given
		// but not compared.
		if why := partialOf(ts, q); why != "" {
			n.add("%s", why)
			return d
		}
		if rec.Unknown > 0 {
			return d
		}
		d.Compared = true
		switch {
		case records != 0:
			d.Diff = (d.Server - records) / records
		case d.Server != 0:
			d.Diff = 1 // no relative difference from zero: any count is all of it
		}
		if math.Abs(d.Server-records) > max(TokenTolerance*records, TokenSlack) {
			cc.Mismatch = true
			n.add("the servers counted %.0f %s tokens, the records %.0f (%+.1f%%; tolerance %.0f%% or %d tokens): requests counted twice, lost, or sent by someone else",
				d.Server, what, records, d.Diff*100, TokenTolerance*100, TokenSlack)
		}
		return d
	}
	cc.Prompt = check(qPromptTokens, rec.Prompt, "prompt")
	cc.Generation = check(qGenerationTokens, rec.Generation, "generation")
	cc.Notes = n
	return cc
}

// partialOf returns why q, as some target read it, leaves part of the
// quantity out; empty when every reading is whole.
func partialOf(ts []*targetData, q quantity) string {
	for _, td := range ts {
		for _, r := range td.readings {
			if r.vals[q] != nil && r.partial[q] != "" {
				return r.partial[q]
			}
		}
	}
	return ""
}

// gpuDevice is one GPU's readings over the row.
type gpuDevice struct {
	source   string
	key      string
	id, uuid string
	model    string
	rs       []gpuAt
}

type gpuAt struct {
	t     int64
	round int
	g     *gpuReading
}

func devices(targets []*targetData) []*gpuDevice {
	var out []*gpuDevice
	for _, td := range targets {
		byKey := map[string]*gpuDevice{}
		var local []*gpuDevice
		for _, r := range td.readings {
			for k, g := range r.gpus {
				d := byKey[k]
				if d == nil {
					d = &gpuDevice{source: td.display, key: k, id: g.id, uuid: g.uuid, model: g.model}
					byKey[k] = d
					local = append(local, d)
				}
				d.rs = append(d.rs, gpuAt{t: r.t, round: r.round, g: g})
			}
		}
		slices.SortFunc(local, func(a, b *gpuDevice) int { return compareIDs(a.id, b.id) })
		out = append(out, local...)
	}
	return out
}

// compareIDs orders DCGM gpu labels numerically where they are numbers.
func compareIDs(a, b string) int {
	var x, y int
	_, ea := fmt.Sscanf(a, "%d", &x)
	_, eb := fmt.Sscanf(b, "%d", &y)
	if ea == nil && eb == nil && x != y {
		return cmp.Compare(x, y)
	}
	return strings.Compare(a, b)
}

func reduceGPU(targets []*targetData, in ReduceInput) *metrics.GPUTelemetry {
	devs := devices(targets)
	var gt *metrics.GPUTelemetry
	var n notes
	for _, td := range targets {
		hasGPU := slices.ContainsFunc(td.readings, func(r *reading) bool { return len(r.gpus) > 0 })
		if td.kind != KindGPU && !hasGPU {
			continue
		}
		if gt == nil {
			gt = &metrics.GPUTelemetry{}
		}
		gt.Sources = append(gt.Sources, td.display)
		if td.kind == KindGPU {
			gt.Failed += td.failed
			failureNote(&n, td)
			if !hasGPU && len(td.readings) > 0 {
				n.add("%s: no DCGM_FI_* metrics in the exposition: is it a DCGM exporter?", td.display)
			}
		}
		for _, r := range td.readings {
			if len(r.gpus) > 0 && inWindow(r.t, in) {
				gt.Scrapes++
			}
		}
	}
	if gt == nil {
		return nil
	}
	gt.GPUs = len(devs)
	if in.WindowEndNS <= in.WindowStartNS {
		n.add("no measured window: the window's figures are absent")
		gt.Notes = n
		return gt
	}

	type field func(*gpuReading) *float64
	util := func(g *gpuReading) *float64 { return g.util }
	memCopy := func(g *gpuReading) *float64 { return g.memCopy }
	power := func(g *gpuReading) *float64 { return g.powerW }
	memGB := func(g *gpuReading) *float64 {
		if g.fbMiB == nil {
			return nil
		}
		return ptr(*g.fbMiB * (1 << 20) / 1e9)
	}
	sm := func(g *gpuReading) *float64 { return g.smMHz }
	temp := func(g *gpuReading) *float64 { return g.tempC }
	values := func(d *gpuDevice, f field) []float64 {
		var vs []float64
		for _, at := range d.rs {
			if v := f(at.g); v != nil && inWindow(at.t, in) {
				vs = append(vs, *v)
			}
		}
		return vs
	}
	over := func(f field) *metrics.Gauge {
		var vs []float64
		for _, d := range devs {
			vs = append(vs, values(d, f)...)
		}
		return gauge(vs)
	}
	gt.Utilization = over(util)
	gt.MemCopyUtilization = over(memCopy)
	gt.MemoryUsedGB = over(memGB)
	gt.SMClockMHz = over(sm)
	gt.TemperatureC = over(temp)
	gt.PowerW = gauge(gpuRounds(devs, power, in, true))

	// Energy: each GPU's counter increase over the window, in J.
	var energy float64
	publishing, complete := 0, true
	for _, d := range devs {
		var ps []tv
		for _, at := range d.rs {
			if at.g.energyMJ != nil {
				ps = append(ps, tv{at.t, *at.g.energyMJ})
			}
		}
		if len(ps) == 0 {
			continue
		}
		publishing++
		inc, resets, _, _, ok := increase(ps, in, false)
		if !ok {
			complete = false
			continue
		}
		if resets > 0 {
			n.add("%s: GPU %s: %s went down between two scrapes; counted from zero after it", d.source, d.id, dcgmEnergy)
		}
		energy += inc / 1000
	}
	if publishing > 0 && complete {
		gt.EnergyJ = &energy
	}

	for _, d := range devs {
		gt.PerGPU = append(gt.PerGPU, metrics.GPUDevice{
			ID: d.id, UUID: d.uuid, Model: d.model, Source: d.source,
			GPUGauges: metrics.GPUGauges{
				Utilization:        gauge(values(d, util)),
				MemCopyUtilization: gauge(values(d, memCopy)),
				PowerW:             gauge(values(d, power)),
				MemoryUsedGB:       gauge(values(d, memGB)),
				SMClockMHz:         gauge(values(d, sm)),
				TemperatureC:       gauge(values(d, temp)),
			},
		})
	}
	gt.Notes = n
	return gt
}

// gpuRounds gives a GPU field per scrape round, summed (or averaged) over
// the GPUs that publish it; a round missing one of them is left out.
func gpuRounds(devs []*gpuDevice, f func(*gpuReading) *float64, in ReduceInput, sum bool) []float64 {
	publishing := 0
	byRound := map[int][]float64{}
	for _, d := range devs {
		any := false
		for _, at := range d.rs {
			v := f(at.g)
			if v == nil {
				continue
			}
			any = true
			if inWindow(at.t, in) {
				byRound[at.round] = append(byRound[at.round], *v)
			}
		}
		if any {
			publishing++
		}
	}
	return combineRounds(byRound, publishing, sum)
}

// points reduces every scrape round of the row to the figures plotted over
// time, thinned evenly to MaxPoints. A figure summed over replicas or GPUs
// is absent from a round in which one of them did not answer.
func points(targets []*targetData) []metrics.TelemetryPoint {
	type roundInfo struct {
		t     int64
		phase string
	}
	rounds := map[int]*roundInfo{}
	var servers []*targetData
	for _, td := range targets {
		if td.kind == KindServer {
			servers = append(servers, td)
		}
		for _, r := range td.readings {
			ri := rounds[r.round]
			if ri == nil {
				rounds[r.round] = &roundInfo{t: r.t, phase: r.phase}
			} else if r.t < ri.t {
				ri.t = r.t
			}
		}
	}
	if len(rounds) == 0 {
		return nil
	}
	keys := make([]int, 0, len(rounds))
	for k := range rounds {
		keys = append(keys, k)
	}
	sort.Ints(keys)

	// Server gauges per round.
	type byRound map[int][]float64
	serverVals := func(q quantity) (byRound, int) {
		exp, published := expected(servers, hasVal(q), q)
		if !published {
			return nil, 0
		}
		out := byRound{}
		for _, td := range exp {
			for _, r := range td.readings {
				if r.vals[q] != nil {
					out[r.round] = append(out[r.round], *r.vals[q])
				}
			}
		}
		return out, len(exp)
	}
	devs := devices(targets)
	gpuVals := func(f func(*gpuReading) *float64) (byRound, int) {
		out := byRound{}
		n := 0
		for _, d := range devs {
			pub := false
			for _, at := range d.rs {
				if v := f(at.g); v != nil {
					pub = true
					out[at.round] = append(out[at.round], *v)
				}
			}
			if pub {
				n++
			}
		}
		return out, n
	}
	reduceRound := func(vals byRound, want, k int, mean bool) *float64 {
		vs := vals[k]
		if want == 0 || len(vs) != want {
			return nil
		}
		var s float64
		for _, v := range vs {
			s += v
		}
		if mean {
			s /= float64(len(vs))
		}
		return &s
	}
	running, nRunning := serverVals(qRunning)
	waiting, nWaiting := serverVals(qWaiting)
	kv, nKV := serverVals(qKVUsage)
	util, nUtil := gpuVals(func(g *gpuReading) *float64 { return g.util })
	power, nPower := gpuVals(func(g *gpuReading) *float64 { return g.powerW })
	mem, nMem := gpuVals(func(g *gpuReading) *float64 {
		if g.fbMiB == nil {
			return nil
		}
		return ptr(*g.fbMiB * (1 << 20) / 1e9)
	})

	var out []metrics.TelemetryPoint
	for _, k := range keys {
		p := metrics.TelemetryPoint{
			TS:             float64(rounds[k].t) / 1e9,
			Phase:          rounds[k].phase,
			Running:        reduceRound(running, nRunning, k, false),
			Waiting:        reduceRound(waiting, nWaiting, k, false),
			KVCacheUsage:   reduceRound(kv, nKV, k, true),
			GPUUtilization: reduceRound(util, nUtil, k, true),
			PowerW:         reduceRound(power, nPower, k, false),
			MemoryUsedGB:   reduceRound(mem, nMem, k, false),
		}
		if p.Running == nil && p.Waiting == nil && p.KVCacheUsage == nil &&
			p.GPUUtilization == nil && p.PowerW == nil && p.MemoryUsedGB == nil {
			continue
		}
		out = append(out, p)
	}
	return thin(out, MaxPoints)
}

// thin keeps at most max points, evenly spaced, the first and the last
// among them.
func thin(ps []metrics.TelemetryPoint, max int) []metrics.TelemetryPoint {
	n := len(ps)
	if n <= max {
		return ps
	}
	out := make([]metrics.TelemetryPoint, 0, max)
	for i := range max {
		out = append(out, ps[i*(n-1)/(max-1)])
	}
	return out
}
