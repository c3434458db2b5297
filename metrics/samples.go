package metrics

// Values returns the distribution's samples in ascending order: the very
// values its statistics were computed from, by the row's semantics. A
// comparison of two runs (package compare) bootstraps them, so that the
// interval it puts on a change in tpot.p95 is about the tpot.p95 the
// summaries print, not a re-derivation that could drift from it. It is nil
// for a Dist read back from JSON, which keeps only the statistics; summarise
// the row's records with an Aggregator to have them. The slice is the
// Dist's own: do not modify it.
func (d Dist) Values() []float64 {
	if len(d.values) != d.Count {
		return nil
	}
	return d.values
}
