package reports

import (
	"io"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/record"
	"github.com/infermatrix/infermatrix/verdict"

	"github.com/infermatrix/infermatrix/metrics"
)

// WriteGitHub renders the decision record's short form as GitHub-flavoured
// Markdown, for a pull-request comment or a job's $GITHUB_STEP_SUMMARY: the
// verdict as decision.md gives it, one line per row with its verdict,
// validity and headline figures, and why each invalid row is invalid.
// decision.md itself is the long form; its plots are files beside it, which
// a comment cannot show, so they are left out here.
func WriteGitHub(w io.Writer, in *Input) error {
	m := &mdWriter{w: w}
	p, man, sum, d := in.Plan, in.Manifest, in.Summary, in.Decision
	title := "infermatrix: " + p.Experiment.Name
	if record.Simulated(man) {
		title += " (" + record.SimulatedTag(man) + ")"
	}
	m.printf("### %s\n\n", cell(title))
	m.verdict(d, sum)
	m.printf("| Row | Verdict | Validity | TTFT p50 / p95 / p99 (ms) | TPOT p50 / p95 / p99 (ms) | Output tok/s | Errors |\n|---|---|---|---|---|---|---|\n")
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		rv := d.Row(rs.ID)
		verdict := record.MatrixVerdict(rv, rs)
		if rs.Status == metrics.RowNotRun {
			m.printf("| %s | %s | — | not run | | | |\n", code(rs.ID), verdictCell(verdict))
			continue
		}
		m.printf("| %s | %s | %s | %s | %s | %s | %s |\n", code(rs.ID), verdictCell(verdict), cell(validityCell(rv)),
			triple(rs.Metrics.TTFT), triple(rs.Metrics.TPOT), numfmt.Num(rs.Throughput.OutputTokensPerS), cell(errorsCell(rs)))
	}
	m.printf("\n")
	listed := false
	for i := range d.Rows {
		rv := &d.Rows[i]
		if rv.Validity.Valid || rv.Verdict == verdict.NotRun || rv.Verdict == verdict.Skipped {
			continue
		}
		for _, r := range rv.Validity.Reasons {
			m.printf("- %s invalid (%s): %s\n", code(rv.ID), cell(r.Check), cell(r.Message))
			listed = true
		}
	}
	if listed {
		m.printf("\n")
	}
	m.printf("<sub>infermatrix %s, experiment sha256 %s; the full record is decision.md in the run directory.</sub>\n",
		cell(man.Tool.Version), code(verdict.ShortCommit(man.Experiment.SHA256)))
	return m.err
}
