package metrics

// Values returns the distribution's samples in ascending order: the very
// values its statistics were computed from, by the row's semantics. A
// comparison of two runs (package compare) bootstraps them, so that the
// interval it puts on a change in tpot.p95 is about the tpot.p95 the
// summaries print, not a re-derivation that could drift from it. It is nil
// for a Dist read back from JSON, which keeps only the statistics; summarise
// the row's records with an Aggregator to have them. The slice is the
// Dist's own: do not modify it. Where the row's samples spilled to disk
// (Options.SpillLimit), they are read back into memory, sorted, at each
// call: a comparison resamples them all anyway.
func (d Dist) Values() []float64 {
	if d.col != nil {
		vs, err := d.col.Sorted()
		if err != nil {
			return nil
		}
		return vs
	}
	if len(d.values) != d.Count {
		return nil
	}
	return d.values
}

// Succeeded reports whether a record counts as a success under sem, as
// the Aggregator counts it (vLLM's rule differs from infermatrix's; see
// vllmSucceeded).
func Succeeded(sem string, r *Record) bool {
	if sem == SemVLLM {
		return vllmSucceeded(r)
	}
	return r.OK()
}

// ITLSamples returns the ITL samples (ms) one successful record adds to its
// row's itl distribution under sem: the gaps between its text events
// (infermatrix), between its chunks with choices (vLLM), or its one
// inter_token_latency (AIPerf). A comparison resamples them request by
// request, since one request's gaps are not independent of each other.
func ITLSamples(sem, api string, r *Record) []float64 {
	var out []float64
	add := func(ns int64) { out = append(out, ms(ns)) }
	switch sem {
	case SemVLLM:
		vllmGaps(r, add)
	case SemAIPerf:
		if v := measure(sem, api, r); v.hasTPOT {
			out = append(out, v.tpot)
		}
	default:
		eventGaps(r.Events, add)
	}
	return out
}

// RequestValues returns what one successful, measured record adds to its
// row's ttft, tpot and e2e distributions under sem (ms), as the Aggregator
// adds them: ttft only when the request has a first token, tpot only when
// it is defined (streamed, two tokens or more).
func RequestValues(sem, api string, r *Record) (ttft, tpot, e2e float64, hasTTFT, hasTPOT bool) {
	v := measure(sem, api, r)
	return ms(v.ttft), v.tpot, ms(v.e2e), v.ttft > 0, v.hasTPOT
}
