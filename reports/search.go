package reports

import "github.com/infermatrix/infermatrix/record"

// searches states each search row's answer in one sentence, right after
// the verdict, beside the sweeps' operating points: both answer "how far
// can we push it".
func (m *mdWriter) searches(in *Input) {
	if in.Analysis == nil || len(in.Analysis.Searches) == 0 {
		return
	}
	m.printf("## Searches\n\n")
	for _, sa := range in.Analysis.Searches {
		m.printf("- %s\n", cell(record.SearchSentence(sa, in.Plan.Server.Hardware)))
	}
	m.printf("\n")
}
