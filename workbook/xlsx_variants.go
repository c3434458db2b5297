package workbook

import (
	"github.com/infermatrix/infermatrix/record"
)

// xlsxSheetVariants sets the server variants side by side, one line per
// question and variant, only in a run with server.variants.
const xlsxSheetVariants = "Variants"

// variants writes the Variants sheet (record.VariantsOf): per question and
// variant the row it is judged by, its figures as numbers, whether it is
// accepted and why not. Figures a row lacks are blank.
func (x *xlsxWriter) variants() error {
	in := x.in
	v := record.VariantsOf(in.Plan, in.Manifest, in.Summary, x.d)
	if v == nil {
		return nil
	}
	if _, err := x.f.NewSheet(xlsxSheetVariants); err != nil {
		return err
	}
	x.used["variants"] = true
	cols := []xlsxColumn{
		{"Question", 28, xlsxKindText}, {"Variant", 16, xlsxKindText}, {"Best", 6, xlsxKindText}, {"Row", 28, xlsxKindText},
		{"Verdict", 12, xlsxKindText}, {"Accepted", 9, xlsxKindText}, {"Output tok/s", 12, xlsxKindRate},
		{"TTFT p95 (ms)", 12, xlsxKindMS}, {"TPOT p95 (ms)", 12, xlsxKindMS}, {"$ per M output tokens", 14, xlsxKindRatio},
		{"Why not accepted", 50, xlsxKindText}, {"Past capacity", 30, xlsxKindText},
	}
	var lines [][]any
	var fills []xlsxFill
	for _, q := range v.Questions {
		name := q.Base
		if q.Question != "" {
			name = q.Question
		}
		for _, c := range q.Cells {
			var out, ttft, tpot, usd any
			if rs := in.Summary.Row(c.Row); rs != nil && c.Row != "" {
				if rs.Throughput.OutputTokensPerS > 0 {
					out = xlsxNum(rs.Throughput.OutputTokensPerS)
				}
				if rs.Metrics.TTFT.Count > 0 {
					ttft = xlsxNum(rs.Metrics.TTFT.P95)
				}
				if rs.Metrics.TPOT.Count > 0 {
					tpot = xlsxNum(rs.Metrics.TPOT.P95)
				}
				if rs.Cost != nil && rs.Cost.USDPerMillionOutputTokens != nil {
					usd = xlsxNum(*rs.Cost.USDPerMillionOutputTokens)
				}
			}
			best, accepted := "", "no"
			if c.Variant == q.Best {
				best = "best"
			}
			if c.Accepted {
				accepted = "yes"
			}
			why := ""
			if !c.Accepted {
				why = c.Why
			}
			past := ""
			for i, id := range c.Rejected {
				if i > 0 {
					past += ", "
				}
				past += id
			}
			lines = append(lines, []any{xlsxStr(name), c.Variant, xlsxStr(best), xlsxStr(c.Row), c.Verdict, accepted, out, ttft, tpot, usd, xlsxStr(why), xlsxStr(past)})
			fills = append(fills, xlsxVerdictFill(c.Verdict))
		}
	}
	return x.table(xlsxSheetVariants, cols, lines, fills, false)
}
