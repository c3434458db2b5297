package record

import (
	"fmt"
	"strings"

	"github.com/infermatrix/infermatrix/internal/numfmt"
	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// VariantsIntro says what the Variants section compares.
const VariantsIntro = "Every question answered under each server variant, side by side: the row each variant is judged by (its operating point for a sweep with an operating_point rule, else its best accepted point by output throughput), with its figures. The best variant is the cheapest per million output tokens among those accepted (valid and passing their rules), or with no price the one with the highest output throughput; variants within 2% of the best are called tied; the rejected ones say why."

// Variants is the record's side-by-side comparison of server variants
// (server.variants): one table per question, one line per variant.
type Variants struct {
	// Servers is one line per variant: how it ran.
	Servers   []VariantServer
	Questions []VariantQuestion
}

// VariantServer is how one variant's server ran.
type VariantServer struct {
	Name, Description string
	// Server is what answered: the built-in server's settings that differ,
	// or the launched command, or the URLs; Engine what discovery found.
	Server, Engine string
	// Error says why the variant's rows did not run.
	Error string
}

// VariantQuestion is one written row (a question) under every variant.
type VariantQuestion struct {
	Base, Question string
	Cells          []VariantCell
	// Best names the best accepted variant, empty when none was
	// accepted; BestWhy says by what.
	Best, BestWhy string
}

// VariantCell is one variant's answer to one question. Figures a row
// lacks are "—", never 0.
type VariantCell struct {
	Variant string
	// Row is the row the variant is judged by; empty when none ran.
	Row                                   string
	Verdict                               string
	Throughput, TTFTp95, TPOTp95, Goodput string
	USDPerMOutput                         string
	// Accepted: the row ran, is valid and passes its rules (for a sweep
	// with an operating_point rule: the variant has an operating point).
	Accepted bool
	// Why says why a variant is not accepted (failing rule, invalid
	// check, no operating point, not run); Rejected lists the valid
	// points that fail (past capacity, for an operating point).
	Why      string
	Rejected []string

	throughput, usd *float64
}

// VariantsOf is the Variants section, or nil for a run without variants.
func VariantsOf(p *schema.Plan, man *rundir.Manifest, sum *metrics.Summary, d *verdict.Decision) *Variants {
	if p == nil || len(p.Server.Variants) == 0 || sum == nil || d == nil {
		return nil
	}
	v := &Variants{}
	infos := map[string]*rundir.VariantInfo{}
	if man != nil {
		for _, vi := range man.Variants {
			infos[vi.Name] = vi
		}
	}
	for _, vp := range p.Server.Variants {
		v.Servers = append(v.Servers, variantServer(p, vp, infos[vp.Name]))
	}
	rows := map[string]*metrics.RowSummary{}
	for i := range sum.Rows {
		rows[sum.Rows[i].ID] = &sum.Rows[i]
	}
	ops := map[string]*verdict.OperatingPoint{}
	for i := range d.OperatingPoints {
		ops[d.OperatingPoints[i].Base] = &d.OperatingPoints[i]
	}
	// Questions in plan order, each variant's rows by its base.
	byBase := map[string][]string{} // base with @variant → row ids
	var bases []string
	questions := map[string]string{}
	for _, r := range p.Rows {
		q := schema.WithoutVariant(r.Base)
		if _, ok := questions[q]; !ok {
			bases = append(bases, q)
			questions[q] = r.Question
		}
		byBase[r.Base] = append(byBase[r.Base], r.ID)
	}
	for _, base := range bases {
		q := VariantQuestion{Base: base, Question: questions[base]}
		for _, vp := range p.Server.Variants {
			vb := base + schema.VariantSuffix(vp.Name)
			q.Cells = append(q.Cells, variantCell(vp.Name, byBase[vb], ops[vb], rows, d, infos[vp.Name], !sum.SLO.IsZero()))
		}
		q.Best, q.BestWhy = bestVariant(q.Cells)
		v.Questions = append(v.Questions, q)
	}
	return v
}

func variantServer(p *schema.Plan, vp schema.VariantPlan, info *rundir.VariantInfo) VariantServer {
	s := VariantServer{Name: vp.Name, Description: vp.Description, Server: "—", Engine: "—"}
	switch {
	case vp.Launch != nil && info != nil && len(info.Command) > 0:
		s.Server = strings.Join(info.Command, " ")
	case vp.Launch != nil:
		s.Server = strings.Join(redact.Command(vp.Launch.Command), " ")
	case vp.Builtin:
		s.Server = "built-in: " + simDiff(p.Server.Sim, vp.Sim)
	case len(vp.URLs) > 0:
		s.Server = strings.Join(vp.URLs, ", ")
	}
	if info != nil {
		if e := info.Discovered.Engine; e != "" {
			s.Engine = e
			if info.Discovered.EngineVersion != "" {
				s.Engine += " " + info.Discovered.EngineVersion
			}
		}
		if info.ReadyAfterS > 0 {
			s.Engine += fmt.Sprintf(" (ready after %s s)", numfmt.Sig(info.ReadyAfterS))
		}
		s.Error = info.Error
	}
	return s
}

// simDiff names the engine settings that make a built-in variant what it
// is, so the table says "max_num_seqs 8", not the whole preset.
func simDiff(base, v schema.SimSettings) string {
	var parts []string
	add := func(name string, differs bool, value any) {
		if differs {
			parts = append(parts, fmt.Sprintf("%s %v", name, value))
		}
	}
	add("preset", base.Preset != v.Preset, v.Preset)
	add("replicas", base.Replicas != v.Replicas, v.Replicas)
	add("max_model_len", base.MaxModelLen != v.MaxModelLen, v.MaxModelLen)
	be, ve := base.Engine, v.Engine
	add("max_num_seqs", be.MaxNumSeqs != ve.MaxNumSeqs, ve.MaxNumSeqs)
	add("max_num_batched_tokens", be.MaxNumBatchedTokens != ve.MaxNumBatchedTokens, ve.MaxNumBatchedTokens)
	add("gpu_memory_utilization", be.GPUMemoryUtilization != ve.GPUMemoryUtilization, ve.GPUMemoryUtilization)
	if ve.PrefixCaching != nil && (be.PrefixCaching == nil || *be.PrefixCaching != *ve.PrefixCaching) {
		parts = append(parts, fmt.Sprintf("prefix_caching %v", *ve.PrefixCaching))
	}
	if len(parts) == 0 {
		return "as server.sim"
	}
	return strings.Join(parts, ", ")
}

// variantCell judges one variant's rows for one question.
func variantCell(name string, ids []string, op *verdict.OperatingPoint, rows map[string]*metrics.RowSummary, d *verdict.Decision, info *rundir.VariantInfo, slo bool) VariantCell {
	c := VariantCell{Variant: name, Verdict: verdict.NotRun, Throughput: "—", TTFTp95: "—", TPOTp95: "—", Goodput: "—", USDPerMOutput: "—"}
	if len(ids) == 0 {
		c.Why = "no rows"
		return c
	}
	if op != nil {
		c.Verdict, c.Rejected = op.Verdict, op.Rejected
		if op.Row == "" {
			c.Why = op.Why
			if info != nil && info.Error != "" {
				c.Why = "not run: " + info.Error
			}
			return c
		}
		c.Accepted = op.Verdict == verdict.Pass
		if !c.Accepted {
			c.Why = op.Why
		}
		c.fill(op.Row, rows[op.Row], slo)
		return c
	}
	// Without an operating point: the best accepted point by throughput,
	// else the first that ran, to say why it was rejected.
	var best, first string
	for _, id := range ids {
		rs, rv := rows[id], d.Row(id)
		if rs == nil || rv == nil || rs.Status == metrics.RowNotRun {
			continue
		}
		if first == "" {
			first = id
		}
		if rv.Valid() && rv.RulesPass() && (best == "" || rs.Throughput.OutputTokensPerS > rows[best].Throughput.OutputTokensPerS) {
			best = id
		}
	}
	switch {
	case best != "":
		c.Accepted = true
		c.Verdict = d.Row(best).Verdict
		c.fill(best, rows[best], slo)
		for _, id := range ids {
			if rv := d.Row(id); id != best && rv != nil && rv.Valid() && !rv.RulesPass() {
				c.Rejected = append(c.Rejected, id)
			}
		}
	case first != "":
		rv := d.Row(first)
		c.Verdict = rv.Verdict
		c.fill(first, rows[first], slo)
		if !rv.Validity.Valid {
			c.Why = "invalid: " + rv.Validity.Summary()
		} else {
			c.Why = "fails " + FailedRules(rv)
		}
	default:
		c.Why = "not run"
		if rs := rows[ids[0]]; rs != nil && rs.Error != "" {
			c.Why = "not run: " + rs.Error
		} else if info != nil && info.Error != "" {
			c.Why = "not run: " + info.Error
		}
	}
	return c
}

// fill sets the figures of row id; goodput only with an SLO, which it
// counts against.
func (c *VariantCell) fill(id string, rs *metrics.RowSummary, slo bool) {
	c.Row = id
	if rs == nil {
		return
	}
	m := rs.Metrics
	if m.TTFT.Count > 0 {
		c.TTFTp95 = ms(m.TTFT.P95)
	}
	if m.TPOT.Count > 0 {
		c.TPOTp95 = ms(m.TPOT.P95)
	}
	if t := rs.Throughput.OutputTokensPerS; t > 0 {
		c.Throughput = grouped(t)
		c.throughput = &t
	}
	if slo {
		c.Goodput = fmt.Sprintf("%s%% (%s req/s)", numfmt.Sig(100*rs.Goodput.Ratio), numfmt.Num(rs.Goodput.RequestsPerS))
	}
	if rs.Cost != nil && rs.Cost.USDPerMillionOutputTokens != nil {
		usd := *rs.Cost.USDPerMillionOutputTokens
		c.USDPerMOutput, c.usd = dollars(&usd), &usd
	}
}

// bestVariant picks the accepted variant with the lowest price per million
// output tokens when every accepted one has a price, else the highest
// output throughput.
func bestVariant(cells []VariantCell) (string, string) {
	var acc []*VariantCell
	priced := true
	for i := range cells {
		if cells[i].Accepted {
			acc = append(acc, &cells[i])
			priced = priced && cells[i].usd != nil
		}
	}
	if len(acc) == 0 {
		return "", "no variant was accepted"
	}
	best := acc[0]
	for _, c := range acc[1:] {
		switch {
		case priced && *c.usd < *best.usd:
			best = c
		case !priced && c.throughput != nil && (best.throughput == nil || *c.throughput > *best.throughput):
			best = c
		}
	}
	if len(acc) == 1 {
		return best.Variant, "the only variant accepted"
	}
	// Variants within TieMargin of the best are not told apart: one run's
	// throughput moves by a few percent on its own, so a pick between
	// them would be noise presented as a finding.
	var tied []string
	for _, c := range acc {
		if c == best {
			continue
		}
		switch {
		case priced && *c.usd <= *best.usd*(1+TieMargin):
			tied = append(tied, "`"+c.Variant+"`")
		case !priced && c.throughput != nil && best.throughput != nil && *c.throughput >= *best.throughput*(1-TieMargin):
			tied = append(tied, "`"+c.Variant+"`")
		}
	}
	why := "highest output throughput among the accepted, at " + best.Throughput + " tok/s"
	if priced {
		why = "cheapest per million output tokens among the accepted, at " + best.USDPerMOutput
	}
	if len(tied) > 0 {
		why += fmt.Sprintf(", tied with %s (within %.0f%%: no difference one run can show)", strings.Join(tied, ", "), 100*TieMargin)
	}
	return best.Variant, why
}

// TieMargin is how close two variants' price (or throughput) must be for
// the record to call them tied rather than name one better.
const TieMargin = 0.02
