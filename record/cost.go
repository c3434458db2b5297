package record

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/verdict"
)

// CostIntro says what the Cost section's figures are.
const CostIntro = "Each row's price over its measured window at the server's price per hour (docs/metrics.md, Cost): what a million tokens cost if the server were kept as busy as the row kept it."

// CostLine is one row of the Cost table, as text.
type CostLine struct {
	Row                               string
	USDPerHour, PerMOutput, PerMTotal string
	OutputPerUSD, OutputPerSPerGPU    string
}

// Cost is the record's Cost section: a line per row that ran, and the
// sentence ranking the accepted rows by price per million output tokens.
type Cost struct {
	Lines   []CostLine
	Ranking string
}

// CostOf is the Cost section, or nil when no row is priced (the experiment
// sets no cost). Accepted rows are those valid and passing their rules;
// a row without a price per output token (no token came back) is not
// ranked.
func CostOf(sum *metrics.Summary, d *verdict.Decision) *Cost {
	if sum == nil {
		return nil
	}
	c := &Cost{}
	type ranked struct {
		id  string
		usd float64
	}
	var accepted []ranked
	for i := range sum.Rows {
		rs := &sum.Rows[i]
		if rs.Status == metrics.RowNotRun || rs.Cost == nil {
			continue
		}
		l := CostLine{Row: rs.ID, USDPerHour: "$" + numfmt.Num(rs.Cost.USDPerHour),
			PerMOutput: dollars(rs.Cost.USDPerMillionOutputTokens), PerMTotal: dollars(rs.Cost.USDPerMillionTotalTokens),
			OutputPerUSD: "—", OutputPerSPerGPU: numfmt.Num(rs.Throughput.OutputTokensPerSPerGPU)}
		if v := rs.Cost.OutputTokensPerUSD; v != nil {
			// Millions of tokens per dollar read as a count: 1,194,017.
			if g, ok := numfmt.Grouped(math.Round(*v)); ok && *v >= 1000 {
				l.OutputPerUSD = g
			} else {
				l.OutputPerUSD = numfmt.Num(*v)
			}
		}
		if rs.Cost.GPUs > 1 {
			l.USDPerHour += fmt.Sprintf(" (%d GPUs)", rs.Cost.GPUs)
		}
		c.Lines = append(c.Lines, l)
		if rv := rowVerdict(d, rs.ID); rv != nil && rv.Valid() && rv.RulesPass() && rs.Cost.USDPerMillionOutputTokens != nil {
			accepted = append(accepted, ranked{rs.ID, *rs.Cost.USDPerMillionOutputTokens})
		}
	}
	if len(c.Lines) == 0 {
		return nil
	}
	slices.SortStableFunc(accepted, func(a, b ranked) int {
		switch {
		case a.usd < b.usd:
			return -1
		case a.usd > b.usd:
			return 1
		}
		return 0
	})
	switch len(accepted) {
	case 0:
		c.Ranking = "No row was accepted (valid and passing its rules) with output tokens to price, so none is ranked by cost."
	case 1:
		c.Ranking = fmt.Sprintf("The one accepted row, `%s`, costs %s per million output tokens.", accepted[0].id, dollars(&accepted[0].usd))
	default:
		var parts []string
		for _, a := range accepted {
			parts = append(parts, fmt.Sprintf("`%s` %s", a.id, dollars(&a.usd)))
		}
		c.Ranking = fmt.Sprintf("Cheapest accepted row per million output tokens: `%s`, at %s. Accepted rows by that price: %s.",
			accepted[0].id, dollars(&accepted[0].usd), strings.Join(parts, ", "))
	}
	return c
}

func dollars(v *float64) string {
	if v == nil {
		return "—"
	}
	return "$" + numfmt.Sig(*v)
}

// rowVerdict is the decision's verdict on row id, or nil.
func rowVerdict(d *verdict.Decision, id string) *verdict.RowVerdict {
	if d == nil {
		return nil
	}
	for i := range d.Rows {
		if d.Rows[i].ID == id {
			return &d.Rows[i]
		}
	}
	return nil
}
