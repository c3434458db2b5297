package compare

import (
	"github.com/infermatrix/infermatrix/schema"
)

// RowDiff is a row that is not compared: added, removed, or run with
// another workload in the new run.
type RowDiff struct {
	ID string `json:"id"`
	// Kind is added, removed or changed.
	Kind string `json:"kind"`
	// Changes are the workload settings that differ (only for changed).
	Changes []Change `json:"changes,omitempty"`
}

// Row diff kinds.
const (
	RowAdded   = "added"
	RowRemoved = "removed"
	RowChanged = "changed"
)

// WorkloadChanges lists the settings of a row that make it another
// workload: lengths, load (concurrency, rate, arrival), how much is sent
// and for how long, the prompts' source (dataset, trace, prefix), the API,
// streaming, the body and the prompts' uniqueness; and the run-wide
// definitions its figures follow (semantics). Two rows that differ in any of
// them measure different things, and a change in their figures says
// nothing about the server. The seed, timeouts and grace periods are left
// out: another seed draws other prompts from the same distribution, which is
// what a rerun does anyway. baseRun and newRun give the API and the
// semantics (their manifests, else their summaries); package reports uses it
// to hold a run's rows against a baseline's.
func WorkloadChanges(base, new *schema.PlannedRow, baseRun, newRun *Run) []Change {
	type setting struct {
		k    string
		b, n any
	}
	bs, ns := baseRun.semantics(), newRun.semantics()
	settings := []setting{
		{"input_tokens", base.Input, new.Input},
		{"output_tokens", base.Output, new.Output},
		{"load", base.Load, new.Load},
		{"requests", base.Requests, new.Requests},
		{"duration", base.Duration, new.Duration},
		{"warmup", base.Warmup, new.Warmup},
		{"warmup_duration", base.WarmupDuration, new.WarmupDuration},
		{"prefix", base.Prefix, new.Prefix},
		{"dataset", base.Dataset, new.Dataset},
		{"trace", base.Trace, new.Trace},
		{"cancel", base.Cancel, new.Cancel},
		{"streaming", base.Streaming, new.Streaming},
		{"tokenizer", base.Tokenizer, new.Tokenizer},
		{"body", base.Body, new.Body},
		{"unique_prompts", base.UniquePrompts, new.UniquePrompts},
		{"api", baseRun.Manifest.Server.Declared.API, newRun.Manifest.Server.Declared.API},
		// A row's own endpoint and an embeddings or rerank row's inputs.
		{"row api", base.API, new.API},
		{"batch", base.Batch, new.Batch},
		{"query_tokens", base.Query, new.Query},
		{"semantics", bs, ns},
	}
	var out []Change
	for _, s := range settings {
		b, n := compactJSON(s.b), compactJSON(s.n)
		if b != n {
			out = append(out, Change{Field: s.k, Base: b, New: n})
		}
	}
	return out
}

// matchRows pairs the two runs' rows by id, in the new run's order (then
// the removed rows in the base's). Rows are taken from the manifests'
// expanded rows, so sweep points match point by point (saturation/c=16 with
// saturation/c=16).
func matchRows(base, new *Run) (matched []string, diffs []RowDiff) {
	inBase := map[string]bool{}
	for _, r := range base.Manifest.Rows {
		inBase[r.ID] = true
	}
	inNew := map[string]bool{}
	for i := range new.Manifest.Rows {
		nr := &new.Manifest.Rows[i]
		inNew[nr.ID] = true
		br := base.planned(nr.ID)
		if br == nil {
			diffs = append(diffs, RowDiff{ID: nr.ID, Kind: RowAdded})
			continue
		}
		if ch := WorkloadChanges(br, nr, base, new); len(ch) > 0 {
			diffs = append(diffs, RowDiff{ID: nr.ID, Kind: RowChanged, Changes: ch})
			continue
		}
		matched = append(matched, nr.ID)
	}
	for _, r := range base.Manifest.Rows {
		if !inNew[r.ID] {
			diffs = append(diffs, RowDiff{ID: r.ID, Kind: RowRemoved})
		}
	}
	return matched, diffs
}
