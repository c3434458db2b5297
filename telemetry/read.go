package telemetry

import (
	"math"
	"slices"
)

// reading is what one successful sample says in the vocabulary.
type reading struct {
	t     int64
	round int
	phase string
	// vals holds gauges and counters, hists the histograms (in seconds);
	// nil where the sample did not carry the quantity.
	vals  [numQuantities]*float64
	hists [numQuantities]*hist
	// family is the family each quantity was read from, for the notes.
	family [numQuantities]string
	// partial says, for a counter that leaves part of the quantity out,
	// what (source.partial); empty for a whole one.
	partial [numQuantities]string
	gpus    map[string]*gpuReading
}

// hist is a cumulative histogram: ascending upper bounds, the last +Inf.
type hist struct {
	les    []float64
	counts []float64
	sum    float64
	count  float64
}

// gpuReading is one GPU's DCGM fields in one sample.
type gpuReading struct {
	id, uuid, model string
	util, memCopy   *float64 // fractions
	fbMiB, powerW   *float64
	energyMJ        *float64
	smMHz, tempC    *float64
}

func ptr(v float64) *float64 { return &v }

// read maps a successful sample into the vocabulary.
func read(s *Sample) *reading {
	r := &reading{t: s.TNS, round: s.Round, phase: s.Phase}
	byName := map[string][]*Series{}
	for i := range s.Series {
		sr := &s.Series[i]
		byName[sr.Name] = append(byName[sr.Name], sr)
	}
	if m := mappingByName(s.Mapping); m != nil {
		for q := range numQuantities {
			for _, src := range m.sources[q] {
				if readSource(r, q, src, byName) {
					r.family[q] = src.name()
					r.partial[q] = src.partial
					break
				}
			}
		}
	}
	r.gpus = readGPUs(byName)
	return r
}

// readSource reads q from one source: its family, plus the values of
// its plus families (all of them needed).
func readSource(r *reading, q quantity, src source, byName map[string][]*Series) bool {
	sel := selectSeries(byName[src.family], src.match)
	if len(sel) == 0 || !readQuantity(r, q, src, sel) {
		return false
	}
	if len(src.plus) == 0 || r.vals[q] == nil {
		return true
	}
	total := *r.vals[q]
	for _, f := range src.plus {
		var part reading
		sel := selectSeries(byName[f], src.match)
		if len(sel) == 0 || !readQuantity(&part, q, src, sel) {
			r.vals[q] = nil
			return false
		}
		total += *part.vals[q]
	}
	r.vals[q] = ptr(total)
	return true
}

func selectSeries(ss []*Series, match map[string]string) []*Series {
	if len(match) == 0 {
		return ss
	}
	var out []*Series
	for _, s := range ss {
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// readQuantity aggregates a family's selected series (an engine per data
// parallel rank, a model per name): counts and counters are summed, a
// ratio averaged, histograms added bucket by bucket. NaN values (a gauge
// with nothing in it) are left out.
func readQuantity(r *reading, q quantity, src source, sel []*Series) bool {
	kind := quantityInfo[q].kind
	if kind == kindHist {
		var acc *hist
		for _, s := range sel {
			h := seriesHist(s)
			if h == nil {
				continue
			}
			if acc == nil {
				acc = h
				continue
			}
			if acc = addHist(acc, h); acc == nil {
				return false
			}
		}
		if acc == nil {
			return false
		}
		r.hists[q] = acc
		return true
	}
	var sum float64
	n := 0
	for _, s := range sel {
		var v *Float
		if src.sum {
			v = s.Sum
		} else {
			v = s.Value
		}
		if v == nil || math.IsNaN(float64(*v)) || math.IsInf(float64(*v), 0) {
			continue
		}
		sum += float64(*v)
		n++
	}
	if n == 0 {
		return false
	}
	if kind == kindRatio {
		sum /= float64(n)
	}
	r.vals[q] = ptr(sum)
	return true
}

func seriesHist(s *Series) *hist {
	if len(s.Buckets) == 0 || s.Sum == nil || s.Count == nil {
		return nil
	}
	h := &hist{sum: float64(*s.Sum), count: float64(*s.Count)}
	for _, b := range s.Buckets {
		h.les = append(h.les, float64(b.LE))
		h.counts = append(h.counts, float64(b.Count))
	}
	if !math.IsInf(h.les[len(h.les)-1], 1) {
		h.les = append(h.les, math.Inf(1))
		h.counts = append(h.counts, h.count)
	}
	return h
}

// addHist adds two histograms with the same bounds; nil when they differ.
func addHist(a, b *hist) *hist {
	if !slices.Equal(a.les, b.les) {
		return nil
	}
	out := &hist{les: a.les, counts: make([]float64, len(a.counts)), sum: a.sum + b.sum, count: a.count + b.count}
	for i := range a.counts {
		out.counts[i] = a.counts[i] + b.counts[i]
	}
	return out
}

// gpuKey tells GPUs apart within one endpoint: by UUID (or DCGM's gpu
// index), and by MIG instance where the exporter splits a GPU.
func gpuKey(l map[string]string) string {
	k := l["UUID"]
	if k == "" {
		k = "gpu" + l["gpu"]
	}
	if mig := l["GPU_I_ID"]; mig != "" {
		k += "/mig" + mig
	}
	return k
}

func readGPUs(byName map[string][]*Series) map[string]*gpuReading {
	var out map[string]*gpuReading
	set := func(name string, scale float64, field func(g *gpuReading) **float64) {
		for _, s := range byName[name] {
			if s.Value == nil || math.IsNaN(float64(*s.Value)) || math.IsInf(float64(*s.Value), 0) {
				continue
			}
			if out == nil {
				out = map[string]*gpuReading{}
			}
			k := gpuKey(s.Labels)
			g := out[k]
			if g == nil {
				g = &gpuReading{id: s.Labels["gpu"], uuid: s.Labels["UUID"], model: s.Labels["modelName"]}
				if mig := s.Labels["GPU_I_ID"]; mig != "" {
					g.id += "/mig" + mig
				}
				out[k] = g
			}
			*field(g) = ptr(float64(*s.Value) * scale)
		}
	}
	set(dcgmGPUUtil, 0.01, func(g *gpuReading) **float64 { return &g.util })
	set(dcgmMemCopyUtil, 0.01, func(g *gpuReading) **float64 { return &g.memCopy })
	set(dcgmFBUsed, 1, func(g *gpuReading) **float64 { return &g.fbMiB })
	set(dcgmPower, 1, func(g *gpuReading) **float64 { return &g.powerW })
	set(dcgmEnergy, 1, func(g *gpuReading) **float64 { return &g.energyMJ })
	set(dcgmSMClock, 1, func(g *gpuReading) **float64 { return &g.smMHz })
	set(dcgmTemp, 1, func(g *gpuReading) **float64 { return &g.tempC })
	return out
}

// quantile is Prometheus' histogram_quantile: the bucket holding the
// q-th observation, linearly interpolated within it (from 0 for the first
// bucket); the highest finite bound when it falls in the +Inf bucket.
// NaN when there are no observations.
func quantile(q float64, les, counts []float64) float64 {
	n := len(les)
	if n < 2 || counts[n-1] <= 0 {
		return math.NaN()
	}
	// Cumulative counts must not decrease; scrapes of a histogram being
	// updated can be torn, and the increase of two such can dip.
	c := make([]float64, n)
	for i, v := range counts {
		c[i] = v
		if i > 0 && c[i] < c[i-1] {
			c[i] = c[i-1]
		}
	}
	rank := q * c[n-1]
	b := 0
	for b < n-1 && c[b] < rank {
		b++
	}
	if b == n-1 {
		return les[n-2]
	}
	if b == 0 && les[0] <= 0 {
		return les[0]
	}
	start, end, count := 0.0, les[b], c[b]
	if b > 0 {
		start = les[b-1]
		count -= c[b-1]
		rank -= c[b-1]
	}
	if count <= 0 {
		return end
	}
	return start + (end-start)*(rank/count)
}
