package telemetry

import (
	"math"
	"slices"
	"strings"

	"github.com/infermatrix/infermatrix/metrics"
)

// Pool gives a repeated row's figures over all its trials: counters summed,
// gauges weighted by their samples, histograms added bucket by bucket and
// their quantiles read again. A counter absent from one trial is absent
// from the pool: a sum over part of the trials is not the row's. The gaps
// are left to FillGaps with the pooled client figures.
func Pool(trials []metrics.RowSummary) (*metrics.ServerTelemetry, *metrics.GPUTelemetry) {
	var ss []*metrics.ServerTelemetry
	var gs []*metrics.GPUTelemetry
	for i := range trials {
		if trials[i].Server != nil {
			ss = append(ss, trials[i].Server)
		}
		if trials[i].GPU != nil {
			gs = append(gs, trials[i].GPU)
		}
	}
	return poolServer(ss, len(trials)), poolGPU(gs, len(trials))
}

func poolServer(ss []*metrics.ServerTelemetry, trials int) *metrics.ServerTelemetry {
	if len(ss) == 0 {
		return nil
	}
	out := &metrics.ServerTelemetry{IntervalS: ss[0].IntervalS}
	var n notes
	if len(ss) < trials {
		n.add("%d of %d trials have no server telemetry: pooled over the others", trials-len(ss), trials)
	}
	var mappingNames []string
	for _, s := range ss {
		for _, src := range s.Sources {
			if !slices.Contains(out.Sources, src) {
				out.Sources = append(out.Sources, src)
			}
		}
		for _, m := range strings.Split(s.Mapping, ",") {
			if m != "" && !slices.Contains(mappingNames, m) {
				mappingNames = append(mappingNames, m)
			}
		}
		out.Scrapes += s.Scrapes
		out.Failed += s.Failed
		for _, note := range s.Notes {
			n.add("%s", note)
		}
	}
	out.Mapping = strings.Join(mappingNames, ",")

	gaugeOf := func(f func(*metrics.ServerTelemetry) *metrics.Gauge) *metrics.Gauge { return poolGauge(each(ss, f)) }
	out.KVCacheUsage = gaugeOf(func(s *metrics.ServerTelemetry) *metrics.Gauge { return s.KVCacheUsage })
	out.NumRequestsRunning = gaugeOf(func(s *metrics.ServerTelemetry) *metrics.Gauge { return s.NumRequestsRunning })
	out.NumRequestsWaiting = gaugeOf(func(s *metrics.ServerTelemetry) *metrics.Gauge { return s.NumRequestsWaiting })

	sumOf := func(f func(*metrics.ServerTelemetry) *float64) *float64 {
		var sum float64
		for _, s := range ss {
			v := f(s)
			if v == nil {
				return nil
			}
			sum += *v
		}
		return &sum
	}
	out.PrefixCacheQueries = sumOf(func(s *metrics.ServerTelemetry) *float64 { return s.PrefixCacheQueries })
	out.PrefixCacheHits = sumOf(func(s *metrics.ServerTelemetry) *float64 { return s.PrefixCacheHits })
	out.Preemptions = sumOf(func(s *metrics.ServerTelemetry) *float64 { return s.Preemptions })
	out.PromptTokens = sumOf(func(s *metrics.ServerTelemetry) *float64 { return s.PromptTokens })
	out.GenerationTokens = sumOf(func(s *metrics.ServerTelemetry) *float64 { return s.GenerationTokens })
	if out.PrefixCacheQueries != nil && out.PrefixCacheHits != nil && *out.PrefixCacheQueries > 0 {
		out.PrefixCacheHitRate = ptr(*out.PrefixCacheHits / *out.PrefixCacheQueries)
	}

	distOf := func(f func(*metrics.ServerTelemetry) *metrics.ServerDist) *metrics.ServerDist {
		return poolDist(each(ss, f))
	}
	out.TTFT = distOf(func(s *metrics.ServerTelemetry) *metrics.ServerDist { return s.TTFT })
	out.TPOT = distOf(func(s *metrics.ServerTelemetry) *metrics.ServerDist { return s.TPOT })
	out.ITL = distOf(func(s *metrics.ServerTelemetry) *metrics.ServerDist { return s.ITL })
	out.E2E = distOf(func(s *metrics.ServerTelemetry) *metrics.ServerDist { return s.E2E })
	out.QueueTime = distOf(func(s *metrics.ServerTelemetry) *metrics.ServerDist { return s.QueueTime })

	out.Tokens = poolTokens(ss)
	out.Notes = n
	return out
}

// poolGauge weighs each trial's gauge by its samples.
// poolGPUGauges pools each gauge of gs over the trials, for all GPUs
// together or for one.
func poolGPUGauges(gs []*metrics.GPUGauges) metrics.GPUGauges {
	of := func(f func(*metrics.GPUGauges) *metrics.Gauge) *metrics.Gauge { return poolGauge(each(gs, f)) }
	return metrics.GPUGauges{
		Utilization:        of(func(g *metrics.GPUGauges) *metrics.Gauge { return g.Utilization }),
		MemCopyUtilization: of(func(g *metrics.GPUGauges) *metrics.Gauge { return g.MemCopyUtilization }),
		PowerW:             of(func(g *metrics.GPUGauges) *metrics.Gauge { return g.PowerW }),
		MemoryUsedGB:       of(func(g *metrics.GPUGauges) *metrics.Gauge { return g.MemoryUsedGB }),
		SMClockMHz:         of(func(g *metrics.GPUGauges) *metrics.Gauge { return g.SMClockMHz }),
		TemperatureC:       of(func(g *metrics.GPUGauges) *metrics.Gauge { return g.TemperatureC }),
	}
}

// each is f of every trial's figures, in trial order.
func each[S, T any](xs []S, f func(S) T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func poolGauge(gs []*metrics.Gauge) *metrics.Gauge {
	var out *metrics.Gauge
	var weighted float64
	for _, g := range gs {
		if g == nil || g.Samples <= 0 {
			continue
		}
		if out == nil {
			out = &metrics.Gauge{Min: g.Min, Max: g.Max}
		}
		out.Min = min(out.Min, g.Min)
		out.Max = max(out.Max, g.Max)
		out.Samples += g.Samples
		weighted += g.Mean * float64(g.Samples)
	}
	if out != nil {
		out.Mean = weighted / float64(out.Samples)
	}
	return out
}

// poolDist adds the trials' histograms (a trial without one saw no
// observation) and reads the quantiles of the sum; absent when the
// trials' buckets differ.
func poolDist(ds []*metrics.ServerDist) *metrics.ServerDist {
	var les, counts []float64
	var count, sum float64
	for _, d := range ds {
		if d == nil || d.Count <= 0 {
			continue
		}
		l := make([]float64, len(d.Buckets))
		for i, b := range d.Buckets {
			l[i] = b.LeMS
		}
		if les == nil {
			les, counts = l, make([]float64, len(l))
		} else if !slices.Equal(les, l) {
			return nil
		}
		for i, b := range d.Buckets {
			counts[i] += b.Count
		}
		count += d.Count
		sum += d.Mean * d.Count
	}
	if count <= 0 || len(les) == 0 {
		return nil
	}
	qles := append(slices.Clone(les), math.Inf(1))
	qcounts := append(slices.Clone(counts), count)
	out := &metrics.ServerDist{
		Count: count,
		Mean:  sum / count,
		P50:   quantile(0.50, qles, qcounts),
		P90:   quantile(0.90, qles, qcounts),
		P95:   quantile(0.95, qles, qcounts),
		P99:   quantile(0.99, qles, qcounts),
	}
	for i := range les {
		out.Buckets = append(out.Buckets, metrics.Bucket{LeMS: les[i], Count: counts[i]})
	}
	return out
}

// poolTokens sums each side of the trials' token checks and judges the
// sums with the same tolerance.
func poolTokens(ss []*metrics.ServerTelemetry) *metrics.CounterCheck {
	out := &metrics.CounterCheck{Prompt: metrics.CounterDiff{Compared: true}, Generation: metrics.CounterDiff{Compared: true}}
	var n notes
	for _, s := range ss {
		if s.Tokens == nil {
			return nil
		}
		for _, pair := range []struct{ to, from *metrics.CounterDiff }{
			{&out.Prompt, &s.Tokens.Prompt}, {&out.Generation, &s.Tokens.Generation},
		} {
			pair.to.Server += pair.from.Server
			pair.to.Records += pair.from.Records
			pair.to.Compared = pair.to.Compared && pair.from.Compared
		}
		for _, note := range s.Tokens.Notes {
			n.add("%s", note)
		}
		// A trial that counted twice and one that lost as many cancel
		// out in the sums; either is a mismatch of the row.
		out.Mismatch = out.Mismatch || s.Tokens.Mismatch
	}
	for _, d := range []*metrics.CounterDiff{&out.Prompt, &out.Generation} {
		if !d.Compared {
			continue
		}
		switch {
		case d.Records != 0:
			d.Diff = (d.Server - d.Records) / d.Records
		case d.Server != 0:
			d.Diff = 1
		}
		if math.Abs(d.Server-d.Records) > max(TokenTolerance*d.Records, TokenSlack) {
			out.Mismatch = true
		}
	}
	out.Notes = n
	return out
}

func poolGPU(gs []*metrics.GPUTelemetry, trials int) *metrics.GPUTelemetry {
	if len(gs) == 0 {
		return nil
	}
	out := &metrics.GPUTelemetry{}
	var n notes
	if len(gs) < trials {
		n.add("%d of %d trials have no GPU telemetry: pooled over the others", trials-len(gs), trials)
	}
	type key struct{ source, id, uuid string }
	var order []key
	perGPU := map[key][]*metrics.GPUDevice{}
	var energy float64
	energyComplete := true
	for _, g := range gs {
		for _, src := range g.Sources {
			if !slices.Contains(out.Sources, src) {
				out.Sources = append(out.Sources, src)
			}
		}
		out.GPUs = max(out.GPUs, g.GPUs)
		out.Scrapes += g.Scrapes
		out.Failed += g.Failed
		if g.EnergyJ == nil {
			energyComplete = false
		} else {
			energy += *g.EnergyJ
		}
		for i := range g.PerGPU {
			d := &g.PerGPU[i]
			k := key{d.Source, d.ID, d.UUID}
			if _, ok := perGPU[k]; !ok {
				order = append(order, k)
			}
			perGPU[k] = append(perGPU[k], d)
		}
		for _, note := range g.Notes {
			n.add("%s", note)
		}
	}
	if energyComplete {
		out.EnergyJ = &energy
	}
	all := make([]*metrics.GPUGauges, len(gs))
	for i, g := range gs {
		all[i] = &g.GPUGauges
	}
	out.GPUGauges = poolGPUGauges(all)
	for _, k := range order {
		ds := perGPU[k]
		dev := metrics.GPUDevice{ID: k.id, UUID: k.uuid, Source: k.source, Model: ds[0].Model}
		each := make([]*metrics.GPUGauges, len(ds))
		for i, d := range ds {
			each[i] = &d.GPUGauges
		}
		dev.GPUGauges = poolGPUGauges(each)
		out.PerGPU = append(out.PerGPU, dev)
	}
	out.Notes = n
	return out
}
