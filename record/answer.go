package record

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// Answer is what decision.md and report.html open with, before any
// table: the verdict and, for each question the experiment asks, its
// answer in one sentence with the headline figures and the price. A
// reviewer who reads nothing else has read the decision; everything
// below it is the evidence.
type Answer struct {
	// Headline and Class are the verdict as VerdictHeadline gives them.
	Headline, Class string
	// Lines are the answers, one per question (a written row and its
	// sweep points or probes), in plan order. Row ids are code spans.
	Lines []AnswerLine
	// Extra are sentences after the questions' (the best server variant).
	Extra []string
}

// AnswerLine is one question's answer.
type AnswerLine struct {
	// Question is the row's question as the experiment words it; empty
	// when the row asks none (its id stands in).
	Question string
	Base     string
	Text     string
}

// AnswerOf is the record's answer. Rows are grouped by the row id as
// written (Base): a sweep or a search answers with its operating point,
// a single row with its verdict and figures. Only rows that ask a
// question are answered when any does; otherwise every written row with
// rules is, so an experiment without questions still opens with what it
// found.
func AnswerOf(p *schema.Plan, sum *metrics.Summary, d *verdict.Decision, an *analysis.Analysis) *Answer {
	a := &Answer{}
	a.Headline, a.Class = VerdictHeadline(d)
	if p == nil || sum == nil || d == nil {
		return a
	}
	type group struct {
		base, question string
		ids            []string
	}
	var groups []*group
	byBase := map[string]*group{}
	asks := false
	for _, r := range p.Rows {
		g := byBase[r.Base]
		if g == nil {
			g = &group{base: r.Base, question: r.Question}
			byBase[r.Base] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, r.ID)
		asks = asks || r.Question != ""
	}
	planned := map[string]*schema.PlannedRow{}
	for i := range p.Rows {
		planned[p.Rows[i].ID] = &p.Rows[i]
	}
	rows := map[string]*metrics.RowSummary{}
	for i := range sum.Rows {
		rows[sum.Rows[i].ID] = &sum.Rows[i]
	}
	searches := map[string]*analysis.SearchAnalysis{}
	if an != nil {
		for i := range an.Searches {
			searches[an.Searches[i].Row] = &an.Searches[i]
		}
	}
	ops := map[string]*verdict.OperatingPoint{}
	for i := range d.OperatingPoints {
		ops[d.OperatingPoints[i].Base] = &d.OperatingPoints[i]
	}
	for _, g := range groups {
		if asks && g.question == "" {
			continue
		}
		if !asks && !hasRules(d, g.ids) {
			continue
		}
		var text string
		if sa := searches[g.base]; sa != nil {
			text = searchAnswer(sa, p.Server.Hardware, rows[sa.PassingRow])
		} else if op := ops[g.base]; op != nil {
			text = operatingAnswer(op, planned[op.Row], rows[op.Row])
		} else {
			text = rowsAnswer(d, planned, rows, g.ids)
		}
		a.Lines = append(a.Lines, AnswerLine{Question: g.question, Base: g.base, Text: text})
	}
	if len(p.Server.Variants) > 0 {
		a.Lines = variantAnswers(a.Lines, VariantsOf(p, nil, sum, d))
	}
	return a
}

// variantAnswers folds each question's answers under every server variant
// into one line: the best variant's answer first, then the variants
// rejected and why (VariantsOf judges which is best), so the answer
// names the configuration to run as well as what it holds.
func variantAnswers(lines []AnswerLine, vs *Variants) []AnswerLine {
	if vs == nil {
		return lines
	}
	text := map[string]string{}
	for _, l := range lines {
		text[l.Base] = l.Text
	}
	var out []AnswerLine
	for _, q := range vs.Questions {
		var parts []string
		if q.Best != "" {
			t, ok := text[q.Base+schema.VariantSuffix(q.Best)]
			if !ok {
				continue // the question is not one the answer covers
			}
			parts = append(parts, fmt.Sprintf("best variant `%s` (%s): %s", q.Best, q.BestWhy, strings.TrimSuffix(t, ".")))
		} else {
			answered := false
			for _, c := range q.Cells {
				if t, ok := text[q.Base+schema.VariantSuffix(c.Variant)]; ok {
					parts = append(parts, fmt.Sprintf("under `%s`, %s", c.Variant, strings.TrimSuffix(t, ".")))
					answered = true
				}
			}
			if !answered {
				continue
			}
			parts = append([]string{"no variant is accepted"}, parts...)
			out = append(out, AnswerLine{Question: q.Question, Base: q.Base, Text: strings.Join(parts, "; ") + "."})
			continue
		}
		for _, c := range q.Cells {
			if c.Accepted {
				continue
			}
			// A variant that did not run says so and no more here: its
			// reason quotes the server's own log, which the Variants
			// section shows escaped; the answer stays the tool's words.
			why := strings.TrimSuffix(c.Why, ".")
			if strings.HasPrefix(why, "not run") {
				why = "did not run (see Variants)"
			}
			parts = append(parts, fmt.Sprintf("`%s` rejected: %s", c.Variant, why))
		}
		out = append(out, AnswerLine{Question: q.Question, Base: q.Base, Text: strings.Join(parts, "; ") + "."})
	}
	return out
}

func hasRules(d *verdict.Decision, ids []string) bool {
	for _, id := range ids {
		if rv := d.Row(id); rv != nil && len(rv.Rules) > 0 {
			return true
		}
	}
	return false
}

// searchAnswer is a search's sentence (SearchSentence) with the passing
// probe's headline figures and price.
func searchAnswer(sa *analysis.SearchAnalysis, hw schema.Hardware, passing *metrics.RowSummary) string {
	s := strings.TrimPrefix(SearchSentence(*sa, hw), "Search `"+sa.Row+"`: ")
	if passing != nil {
		s = strings.TrimSuffix(s, ".") + fmt.Sprintf(". At `%s`: %s.", passing.ID, Headline(passing))
	}
	return s
}

// operatingAnswer is a sweep's answer: the operating point's load and
// figures, or why there is none.
func operatingAnswer(op *verdict.OperatingPoint, pr *schema.PlannedRow, rs *metrics.RowSummary) string {
	if op.Row == "" || rs == nil {
		return op.Why
	}
	s := fmt.Sprintf("operating point `%s`", op.Row)
	if l := LoadPhrase(pr); l != "" {
		s = fmt.Sprintf("holds %s (`%s`)", l, op.Row)
	}
	s += ": " + Headline(rs)
	if len(op.Rejected) > 0 {
		s += fmt.Sprintf("; past capacity: %s", CodeList(op.Rejected))
	}
	return s + "."
}

// LoadPhrase is a row's offered load in words: "16 users", "12
// requests/s"; empty for a trace replay.
func LoadPhrase(pr *schema.PlannedRow) string {
	if pr == nil {
		return ""
	}
	switch pr.Load.Mode {
	case schema.ModeConcurrency:
		return fmt.Sprintf("%d user%s", pr.Load.Concurrency, numfmt.Plural(pr.Load.Concurrency))
	case schema.ModeRate:
		return numfmt.Num(pr.Load.Rate) + " requests/s"
	}
	return ""
}

// rowsAnswer is the answer of a written row without an operating point
// or a search: a single row's verdict with its figures or the clause it
// failed; a sweep's busiest passing point with its figures, then each
// point that did not pass and why (at most a few, then a count), so a
// long sweep still answers in a sentence.
func rowsAnswer(d *verdict.Decision, planned map[string]*schema.PlannedRow, rows map[string]*metrics.RowSummary, ids []string) string {
	if len(ids) == 1 {
		return rowAnswer(d, rows, ids[0]) + "."
	}
	busiest := ""
	passing := 0
	for _, id := range ids {
		if rv := d.Row(id); rv != nil && rv.Verdict == verdict.Pass && rows[id] != nil {
			busiest = id
			passing++
		}
	}
	var parts []string
	if busiest != "" {
		load := LoadPhrase(planned[busiest])
		if load != "" {
			load = " at " + load
		}
		parts = append(parts, fmt.Sprintf("%d of %d points pass, the busiest `%s`%s: %s", passing, len(ids), busiest, load, Headline(rows[busiest])))
	} else {
		parts = append(parts, fmt.Sprintf("none of %d points passes", len(ids)))
	}
	const shown = 3
	var rest []string
	for _, id := range ids {
		if rv := d.Row(id); rv != nil && rv.Verdict == verdict.Pass {
			continue
		}
		rest = append(rest, id)
	}
	for i, id := range rest {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more not passing", len(rest)-shown))
			break
		}
		parts = append(parts, rowAnswer(d, rows, id))
	}
	return strings.Join(parts, "; ") + "."
}

// rowAnswer is one row's verdict in a clause: its figures when it passes
// or has no rules, the clause it failed, why it cannot be judged.
func rowAnswer(d *verdict.Decision, rows map[string]*metrics.RowSummary, id string) string {
	rv, rs := d.Row(id), rows[id]
	if rv == nil || rs == nil || rv.Verdict == verdict.NotRun {
		return fmt.Sprintf("`%s` did not run", id)
	}
	switch rv.Verdict {
	case verdict.Skipped:
		return fmt.Sprintf("`%s` was left out of this run", id)
	case verdict.Invalid:
		return fmt.Sprintf("`%s` cannot be judged: %s", id, strings.TrimSuffix(ValidityText(rv), "."))
	case verdict.Pass:
		if st := operatingStep(rv, rs); st != nil {
			// A ramp's answer is its operating step, not its pooled
			// figures, which mix every level.
			top := ""
			if st == &rs.Steps[len(rs.Steps)-1] {
				top = " (the ramp's top: the limit is above it)"
			}
			return fmt.Sprintf("`%s` holds up to its step %s%s: %s", id, st.Label, top, Headline(&st.RowSummary))
		}
		return fmt.Sprintf("`%s` passes: %s", id, Headline(rs))
	case verdict.Fail, verdict.Rejected:
		return fmt.Sprintf("`%s` fails %s", id, FailedRules(rv))
	}
	return fmt.Sprintf("`%s` (no rules): %s", id, Headline(rs))
}

// operatingStep is a ramped row's operating step (the highest valid
// step passing every rule), or nil.
func operatingStep(rv *verdict.RowVerdict, rs *metrics.RowSummary) *metrics.StepSummary {
	if rv.Ramp == nil || rv.Ramp.Operating == "" {
		return nil
	}
	for i := range rs.Steps {
		if rs.Steps[i].Label == rv.Ramp.Operating {
			return &rs.Steps[i]
		}
	}
	return nil
}

// FailedRules names a row's failed rules with the values that failed
// them, in a phrase: "`ttft.p95 < 250` (ttft.p95 = 312)".
func FailedRules(rv *verdict.RowVerdict) string {
	var parts []string
	for _, r := range rv.Rules {
		if r.Pass {
			continue
		}
		if r.Reason != "" || len(r.Failed) == 0 {
			parts = append(parts, fmt.Sprintf("%s (%s)", r.Rule, strings.TrimSuffix(orDash(r.Reason), ".")))
			continue
		}
		for _, c := range r.Failed {
			t := "`" + strings.ReplaceAll(c.Text, "`", "'") + "`"
			switch {
			case c.Reason != "":
				t += " (" + c.Reason + ")"
			case len(c.Values) > 0:
				t += " with " + FormatValues(c.Values)
			}
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 {
		return "its rules"
	}
	return strings.Join(parts, "; ")
}

// Headline is a row's headline figures in a phrase: TTFT and TPOT p95
// (E2E p95 for a row without streamed tokens), output throughput, and
// its price per million output tokens when the experiment sets one; for
// an embeddings or rerank row, inputs and input tokens per second and the
// price per million tokens.
// Figures a row lacks are left out, never written as zero.
func Headline(rs *metrics.RowSummary) string {
	var parts []string
	m := rs.Metrics
	if m.TTFT.Count > 0 {
		parts = append(parts, "TTFT p95 "+ms(m.TTFT.P95))
	}
	if m.TPOT.Count > 0 {
		parts = append(parts, "TPOT p95 "+ms(m.TPOT.P95))
	}
	if m.TTFT.Count == 0 && m.E2E.Count > 0 {
		parts = append(parts, "E2E p95 "+ms(m.E2E.P95))
	}
	switch {
	case rs.Throughput.InputsPerS > 0:
		// An embeddings or rerank row: its work is its inputs, and it
		// has no output tokens to price.
		parts = append(parts, grouped(rs.Throughput.InputsPerS)+" inputs/s", grouped(rs.Throughput.InputTokensPerS)+" input tok/s")
		if rs.Cost != nil && rs.Cost.USDPerMillionTotalTokens != nil {
			parts = append(parts, dollars(rs.Cost.USDPerMillionTotalTokens)+" per million tokens")
		}
	case rs.Throughput.OutputTokensPerS > 0:
		parts = append(parts, grouped(rs.Throughput.OutputTokensPerS)+" output tok/s")
		if rs.Cost != nil && rs.Cost.USDPerMillionOutputTokens != nil {
			parts = append(parts, dollars(rs.Cost.USDPerMillionOutputTokens)+" per million output tokens")
		}
	case rs.Throughput.RequestsPerS > 0:
		parts = append(parts, numfmt.Sig(rs.Throughput.RequestsPerS)+" requests/s")
	}
	if len(parts) == 0 {
		return "no figures"
	}
	return strings.Join(parts, ", ")
}

// ms writes a latency with the precision a reader compares at.
func ms(v float64) string {
	if v >= 1000 {
		return numfmt.Sig(v/1000) + " s"
	}
	return numfmt.Sig(v) + " ms"
}

// grouped writes a large figure as a count (3,462), a small one with its
// significant digits.
func grouped(v float64) string {
	if v >= 1000 {
		if g, ok := numfmt.Grouped(math.Round(v)); ok {
			return g
		}
	}
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return numfmt.Sig(v)
}
