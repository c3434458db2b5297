package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/metrics/samples"
	"github.com/infermatrix/infermatrix/stats"
)

// Dist summarises one metric's samples. Statistics are exact: every sample
// is kept until the row's summary is made (past Options.SpillLimit, in a
// file: package metrics/samples), because an approximate p99 in a sign-off
// document is a p99 nobody can defend.
//
// Percentiles use linear interpolation between closest ranks (Hyndman and
// Fan type 7, numpy's default), and Std is the population standard deviation
// (ddof=0), the same choices vLLM's and AIPerf's benchmarks make, so the
// figures agree with theirs on the same samples.
type Dist struct {
	Count int     `json:"count" expr:"count"`
	Mean  float64 `json:"mean" expr:"mean"`
	Std   float64 `json:"std" expr:"std"`
	Min   float64 `json:"min" expr:"min"`
	Max   float64 `json:"max" expr:"max"`
	P50   float64 `json:"p50" expr:"p50"`
	P90   float64 `json:"p90" expr:"p90"`
	P95   float64 `json:"p95" expr:"p95"`
	P99   float64 `json:"p99" expr:"p99"`
	// Extra holds any further percentiles the experiment asked for, keyed as
	// in JSON ("p75", "p99.9").
	Extra map[string]float64 `json:"-" expr:"-"`

	values []float64 // sorted samples, kept for p(metric, q); nil once read back from JSON
	// col holds the samples instead when they spilled to disk (see
	// columnDist): it answers p(metric, q) by selection.
	col *samples.Column
	// fill, when set, stands in for every statistic of an empty
	// distribution (see RowEnv.Filled).
	fill *float64
}

func filledDist(v float64) Dist {
	return Dist{Mean: v, Min: v, Max: v, P50: v, P90: v, P95: v, P99: v, fill: &v}
}

// standardPercentiles are always reported.
var standardPercentiles = []float64{50, 90, 95, 99}

// NewDist summarises values (which it sorts in place and keeps). extra lists
// percentiles to report beyond p50, p90, p95 and p99.
func NewDist(values []float64, extra []float64) Dist {
	d := Dist{Count: len(values), values: values}
	if len(values) == 0 {
		return d
	}
	sort.Float64s(values)
	// Kahan-free two-pass mean and variance: samples number in the
	// millions at most, and two passes avoid the cancellation of the
	// sum-of-squares formula.
	var sum float64
	for _, v := range values {
		sum += v
	}
	d.Mean = sum / float64(len(values))
	var ss float64
	for _, v := range values {
		dv := v - d.Mean
		ss += dv * dv
	}
	d.Std = math.Sqrt(ss / float64(len(values)))
	d.Min, d.Max = values[0], values[len(values)-1]
	d.P50 = percentile(values, 50)
	d.P90 = percentile(values, 90)
	d.P95 = percentile(values, 95)
	d.P99 = percentile(values, 99)
	for _, q := range extra {
		if isStandard(q) {
			continue
		}
		if d.Extra == nil {
			d.Extra = map[string]float64{}
		}
		d.Extra[PercentileKey(q)] = percentile(values, q)
	}
	return d
}

func isStandard(q float64) bool {
	for _, s := range standardPercentiles {
		if q == s {
			return true
		}
	}
	return false
}

// percentile is numpy.percentile(sorted, q) with the default linear method;
// the one definition lives in stats, which compare's intervals use too, so a
// summary's p99 and a comparison's p99 are the same number.
func percentile(sorted []float64, q float64) float64 { return stats.Percentile(sorted, q) }

// Percentile returns the q-th percentile (0 ≤ q ≤ 100) from the raw samples.
// It fails when the samples are not loaded, as for a Dist read from
// summary.json; callers rebuild the summary from requests.jsonl instead.
func (d Dist) Percentile(q float64) (float64, error) {
	if q < 0 || q > 100 || math.IsNaN(q) {
		return 0, fmt.Errorf("percentile %v is outside 0..100", q)
	}
	if d.Count == 0 {
		if d.fill != nil {
			return *d.fill, nil
		}
		return 0, fmt.Errorf("no samples")
	}
	if d.col != nil {
		if v, ok := d.lookup(q); ok {
			return v, nil
		}
		return d.col.Percentile(q)
	}
	if len(d.values) != d.Count {
		if v, ok := d.lookup(q); ok {
			return v, nil
		}
		return 0, fmt.Errorf("raw samples not loaded")
	}
	return percentile(d.values, q), nil
}

func (d Dist) lookup(q float64) (float64, bool) {
	switch q {
	case 0:
		return d.Min, true
	case 50:
		return d.P50, true
	case 90:
		return d.P90, true
	case 95:
		return d.P95, true
	case 99:
		return d.P99, true
	case 100:
		return d.Max, true
	}
	v, ok := d.Extra[PercentileKey(q)]
	return v, ok
}

// PercentileKey names a percentile as the JSON keys do: 99 → "p99",
// 99.9 → "p99.9".
func PercentileKey(q float64) string {
	return "p" + strconv.FormatFloat(q, 'f', -1, 64)
}

// MarshalJSON writes the fixed statistics in a stable order followed by any
// extra percentiles in ascending order, so summary files diff cleanly. A
// metric with no samples is written as {"count":0}: zeros there would read
// as real measurements.
func (d Dist) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if d.Count == 0 {
		return []byte(`{"count":0}`), nil
	}
	fmt.Fprintf(&b, `{"count":%d`, d.Count)
	for _, kv := range []struct {
		k string
		v float64
	}{{"mean", d.Mean}, {"std", d.Std}, {"min", d.Min}, {"max", d.Max},
		{"p50", d.P50}, {"p90", d.P90}, {"p95", d.P95}, {"p99", d.P99}} {
		b.WriteString(`,"` + kv.k + `":`)
		b.WriteString(formatFloat(kv.v))
	}
	keys := make([]string, 0, len(d.Extra))
	for k := range d.Extra {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return percentileOf(keys[i]) < percentileOf(keys[j]) })
	for _, k := range keys {
		b.WriteString(`,"` + k + `":`)
		b.WriteString(formatFloat(d.Extra[k]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func percentileOf(key string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimPrefix(key, "p"), 64)
	return f
}

// formatFloat writes a float with at most 6 decimals: nanosecond precision
// for millisecond values, and no float noise like 12.300000000000001.
func formatFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', 6, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Dist) UnmarshalJSON(data []byte) error {
	var m map[string]float64
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("metric summary: %w", err)
	}
	*d = Dist{}
	for k, v := range m {
		switch k {
		case "count":
			d.Count = int(v)
		case "mean":
			d.Mean = v
		case "std":
			d.Std = v
		case "min":
			d.Min = v
		case "max":
			d.Max = v
		case "p50":
			d.P50 = v
		case "p90":
			d.P90 = v
		case "p95":
			d.P95 = v
		case "p99":
			d.P99 = v
		default:
			if strings.HasPrefix(k, "p") {
				if d.Extra == nil {
					d.Extra = map[string]float64{}
				}
				d.Extra[k] = v
			}
		}
	}
	return nil
}
