package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/infermatrix/infermatrix/internal/textsafe"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/record"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/verdict"
)

// variants writes the Variants section: each question under every server
// variant, side by side (record.VariantsOf).
func (m *mdWriter) variants(v *record.Variants) {
	if v == nil {
		return
	}
	m.printf("## Variants\n\n%s\n\n", record.VariantsIntro)
	m.printf("| Variant | Server | Engine | |\n|---|---|---|---|\n")
	for _, s := range v.Servers {
		name := code(s.Name)
		if s.Description != "" {
			name += " " + cell(s.Description)
		}
		note := ""
		if s.Error != "" {
			note = "⚠ rows not run: " + cell(s.Error)
		}
		m.printf("| %s | %s | %s | %s |\n", name, cell(s.Server), cell(s.Engine), note)
	}
	m.printf("\n")
	for _, q := range v.Questions {
		title := code(q.Base)
		if q.Question != "" {
			title = "*" + cell(q.Question) + "* (" + code(q.Base) + ")"
		}
		m.printf("%s\n\n", title)
		m.printf("| Variant | Row | Verdict | Output tok/s | TTFT p95 | TPOT p95 | Goodput | $ per M output | |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range q.Cells {
			name := code(c.Variant)
			if c.Variant == q.Best {
				name = "**" + name + "** (best)"
			}
			row := "—"
			if c.Row != "" {
				row = code(c.Row)
			}
			m.printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, row, verdictCell(c.Verdict),
				c.Throughput, c.TTFTp95, c.TPOTp95, c.Goodput, c.USDPerMOutput, cell(variantNote(c)))
		}
		m.printf("\n")
	}
}

// variantNote is why a variant is not accepted, and the points it rejects.
func variantNote(c record.VariantCell) string {
	var parts []string
	if !c.Accepted && c.Why != "" {
		parts = append(parts, "rejected: "+c.Why)
	}
	if len(c.Rejected) > 0 {
		parts = append(parts, "past capacity: "+record.CodeList(c.Rejected))
	}
	return strings.Join(parts, "; ")
}

// htmlVariants is the Variants section as report.html shows it.
type htmlVariants struct {
	Intro     string
	Servers   []record.VariantServer
	Questions []htmlVariantQuestion
}

type htmlVariantQuestion struct {
	Base, Question, Best string
	Cells                []htmlVariantCell
}

type htmlVariantCell struct {
	record.VariantCell
	Note []seg
}

func htmlVariantsOf(v *record.Variants) *htmlVariants {
	if v == nil {
		return nil
	}
	h := &htmlVariants{Intro: record.VariantsIntro, Servers: v.Servers}
	for _, q := range v.Questions {
		hq := htmlVariantQuestion{Base: q.Base, Question: q.Question, Best: q.Best}
		for _, c := range q.Cells {
			hq.Cells = append(hq.Cells, htmlVariantCell{VariantCell: c, Note: mdSegs(variantNote(c))})
		}
		h.Questions = append(h.Questions, hq)
	}
	return h
}

// htmlVariantsTemplate is the section's markup, included in htmlTemplate.
const htmlVariantsTemplate = `{{- with .Variants}}
<section id="variants">
<h2>Variants</h2>
<p>{{.Intro}}</p>
<div class="scroll"><table>
<thead><tr><th>Variant</th><th>Server</th><th>Engine</th><th></th></tr></thead>
<tbody>
{{- range .Servers}}
<tr><td class="id"><code>{{.Name}}</code>{{if .Description}} {{.Description}}{{end}}</td><td>{{.Server}}</td><td>{{.Engine}}</td><td>{{if .Error}}⚠ rows not run: {{.Error}}{{end}}</td></tr>
{{- end}}
</tbody>
</table></div>
{{- range .Questions}}
<h3>{{if .Question}}{{.Question}} (<code>{{.Base}}</code>){{else}}<code>{{.Base}}</code>{{end}}</h3>
<div class="scroll"><table>
<thead><tr><th>Variant</th><th>Row</th><th>Verdict</th><th class="num">Output tok/s</th><th class="num">TTFT p95</th><th class="num">TPOT p95</th><th class="num">Goodput</th><th class="num">$ per M output</th><th></th></tr></thead>
<tbody>
{{- $best := .Best}}
{{- range .Cells}}
<tr><td class="id"><code>{{.Variant}}</code>{{if eq .Variant $best}} <strong>(best)</strong>{{end}}</td><td>{{if .Row}}<code>{{.Row}}</code>{{else}}—{{end}}</td><td>{{.Verdict}}</td><td class="num">{{.Throughput}}</td><td class="num">{{.TTFTp95}}</td><td class="num">{{.TPOTp95}}</td><td class="num">{{.Goodput}}</td><td class="num">{{.USDPerMOutput}}</td><td>{{template "segs" .Note}}</td></tr>
{{- end}}
</tbody>
</table></div>
{{- end}}
</section>
{{end}}`

// writePlanVariants lists the server variants a plan runs its rows under,
// each with what it runs against, in run order.
func writePlanVariants(w io.Writer, p *schema.Plan) {
	if len(p.Server.Variants) == 0 {
		return
	}
	fmt.Fprintf(w, "server variants, run in this order (every row once under each, as ROW@VARIANT):\n")
	for _, v := range record.VariantsOf(p, nil, &metrics.Summary{}, &verdict.Decision{}).Servers {
		fmt.Fprintf(w, "  %s: %s\n", v.Name, textsafe.Terminal(v.Server))
	}
	fmt.Fprintln(w)
}
