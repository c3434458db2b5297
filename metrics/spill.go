package metrics

import (
	"fmt"
	"slices"

	"github.com/infermatrix/infermatrix/metrics/samples"
)

// columnDist summarises a column as NewDist summarises a slice. A column
// still in memory goes through NewDist itself, so that an ordinary row's
// figures are bit for bit what they always were; a spilled one is
// summarised from its file (samples.Column.Summarise), where only the
// mean and standard deviation may differ, in their last digits, from an
// in-memory sort's, and the Dist keeps the column to answer p(metric, q)
// and Values.
func columnDist(c *samples.Column, extra []float64) (Dist, error) {
	if vs, ok := c.InMemory(); ok {
		return NewDist(vs, extra), nil
	}
	qs := slices.Clone(standardPercentiles)
	for _, q := range extra {
		if !isStandard(q) {
			qs = append(qs, q)
		}
	}
	s, err := c.Summarise(qs)
	if err != nil {
		return Dist{}, err
	}
	d := Dist{Count: s.Count, Mean: s.Mean, Std: s.Std, Min: s.Min, Max: s.Max, col: c}
	if d.Count == 0 {
		return Dist{}, nil
	}
	d.P50, d.P90, d.P95, d.P99 = s.Percentiles[0], s.Percentiles[1], s.Percentiles[2], s.Percentiles[3]
	for i, q := range qs[len(standardPercentiles):] {
		if d.Extra == nil {
			d.Extra = map[string]float64{}
		}
		d.Extra[PercentileKey(q)] = s.Percentiles[len(standardPercentiles)+i]
	}
	return d, nil
}

// dist summarises one of the row's columns. A spill file that cannot be
// read back leaves the metric absent, and a note says so: a figure from
// part of the samples would be a figure nobody could defend.
func (a *Aggregator) dist(name string, c *samples.Column, extra []float64) Dist {
	d, err := columnDist(c, extra)
	if err != nil {
		a.spillFailed(name, err)
	}
	return d
}

func (a *Aggregator) spillFailed(name string, err error) {
	a.spillNotes = append(a.spillNotes, fmt.Sprintf("%s left out: its samples spilled to disk could not be read back (%v)", name, err))
}
