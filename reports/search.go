package reports

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"

	"github.com/infermatrix/infermatrix/record"
)

// searches states each search row's answer in one sentence, right after
// the verdict, beside the sweeps' operating points: both answer "how far
// can we push it".
func (m *mdWriter) searches(in *Input) {
	if in.Analysis == nil || len(in.Analysis.Searches) == 0 {
		return
	}
	m.printf("## Searches\n\n")
	for _, sa := range in.Analysis.Searches {
		var b strings.Builder
		// The sentence's code spans (ids, clauses) stay code; the rest,
		// which quotes rule names and validity messages, is escaped.
		for _, sg := range mdSegs(record.SearchSentence(sa, in.Plan.Server.Hardware)) {
			if sg.Code {
				b.WriteString(code(sg.Text))
			} else {
				// cell trims; the spaces around code spans are the
				// sentence's own.
				t := sg.Text
				if strings.HasPrefix(t, " ") {
					b.WriteString(" ")
				}
				b.WriteString(cell(t))
				if strings.HasSuffix(t, " ") && strings.TrimSpace(t) != "" {
					b.WriteString(" ")
				}
			}
		}
		m.printf("- %s\n", b.String())
	}
	m.printf("\n")
}

// loadText is a row's load for the workload matrix; a search's probe says
// it is one, and which.
func loadText(r *schema.PlannedRow) string {
	if r.Probe == nil {
		return r.LoadString() // with a prefill cap, or a conversation row's arrivals
	}
	return fmt.Sprintf("%s (probe %d of search %s)", r.Load, r.Probe.Index, r.Probe.Search)
}

// probeCells is, for a run with search rows, each probe's search row and
// place in the search, as summary.csv's probe_of and probe cells; nil for
// a run without probes.
func probeCells(d *verdict.Decision) map[string][2]string {
	var out map[string][2]string
	for _, rv := range d.Rows {
		if rv.Search == "" {
			continue
		}
		if out == nil {
			out = map[string][2]string{}
		}
		out[rv.ID] = [2]string{rv.Search, strconv.Itoa(rv.Probe)}
	}
	return out
}
