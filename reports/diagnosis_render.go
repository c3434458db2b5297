package reports

import (
	"strings"

	"github.com/infermatrix/infermatrix/diagnosis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/record"
	"github.com/infermatrix/infermatrix/verdict"
)

// mdTelemetry writes the Server and GPU table and its notes.
func (m *mdWriter) telemetry(sum *metrics.Summary) {
	lines := record.TelemetryLines(sum)
	if lines == nil {
		return
	}
	m.printf("## Server and GPU\n\n%s\n\n", record.TelemetryIntro)
	m.printf("| Row | Scrapes | KV cache use | Running | Waiting | Prefix-cache hits | Preemptions | Server TTFT | TTFT gap | Server TPOT | TPOT gap | GPU utilization | GPU power (W) | GPU memory (GB) | Token counters |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	bold := func(s string, b bool) string {
		if b {
			return "**" + s + "**"
		}
		return s
	}
	for _, l := range lines {
		m.printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", code(l.Row), l.Scrapes, l.KV, l.Running, l.Waiting,
			l.PrefixHits, bold(l.Preemptions, l.PreemptedBad), l.ServerTTFT, l.TTFTGap, l.ServerTPOT, l.TPOTGap, l.GPUUtil, l.Power, l.Memory, bold(l.Tokens, l.TokensBad))
	}
	m.printf("\n")
	if notes := record.TelemetryNotes(sum); len(notes) > 0 {
		m.printf("Telemetry notes:\n\n")
		for _, n := range notes {
			m.printf("- %s: %s.\n", codeSpan(n.Row), cell(n.Text))
		}
		m.printf("\n")
	}
}

// diagnosis writes the Diagnosis section, which every record has.
func (m *mdWriter) diagnosis(dg *diagnosis.Diagnosis) {
	m.printf("## Diagnosis\n\n%s\n\n", record.DiagnosisIntro)
	for _, f := range dg.Findings {
		m.printf("- **%s: %s** (%s). %s.\n", codeSpan(f.Row), cell(f.Regime), f.Severity, cell(record.UpperFirst(f.Symptom)))
		m.printf("  - Evidence: %s.\n", cell(strings.Join(f.Evidence, "; ")))
		m.printf("  - Next: %s\n", cell(f.Next))
	}
	if len(dg.Findings) > 0 {
		m.printf("\n")
	}
	if s := record.DiagnosisScope(dg); len(s) > 0 {
		m.printf("%s\n\n", strings.Join(s, " "))
	}
}

// htmlTelemetry is the Server and GPU section of report.html.
type htmlTelemetry struct {
	Intro string
	Lines []record.TelemetryLine
	Notes []record.TelemetryNote
}

func htmlTelemetryOf(sum *metrics.Summary) *htmlTelemetry {
	lines := record.TelemetryLines(sum)
	if lines == nil {
		return nil
	}
	return &htmlTelemetry{Intro: record.TelemetryIntro, Lines: lines, Notes: record.TelemetryNotes(sum)}
}

// htmlDiagnosis is the Diagnosis section of report.html.
type htmlDiagnosis struct {
	Intro    string
	Findings []htmlFinding
	Scope    [][]seg
}

type htmlFinding struct {
	Row, Regime string
	Severity    htmlBadge
	Symptom     []seg
	Evidence    [][]seg
	Next        []seg
}

func htmlDiagnosisOf(dg *diagnosis.Diagnosis) *htmlDiagnosis {
	h := &htmlDiagnosis{Intro: record.DiagnosisIntro}
	for _, f := range dg.Findings {
		hf := htmlFinding{Row: f.Row, Regime: f.Regime, Severity: severityBadge(f.Severity), Symptom: mdSegs(record.UpperFirst(f.Symptom) + "."), Next: mdSegs(f.Next)}
		for _, e := range f.Evidence {
			hf.Evidence = append(hf.Evidence, mdSegs(e))
		}
		h.Findings = append(h.Findings, hf)
	}
	for _, s := range record.DiagnosisScope(dg) {
		h.Scope = append(h.Scope, mdSegs(s))
	}
	return h
}

func severityBadge(s string) htmlBadge {
	switch s {
	case diagnosis.SeverityFail:
		return htmlBadge{s, "fail"}
	case diagnosis.SeverityWarn:
		return htmlBadge{s, "incomplete"}
	}
	return htmlBadge{s, "none"}
}

// cost writes the Cost section when the experiment sets a price.
func (m *mdWriter) cost(sum *metrics.Summary, d *verdict.Decision) {
	c := record.CostOf(sum, d)
	if c == nil {
		return
	}
	m.printf("## Cost\n\n%s\n\n", record.CostIntro)
	m.printf("| Row | Price per hour | $ per M output tokens | $ per M total tokens | Output tokens per $ | Output tok/s per GPU |\n|---|---|---|---|---|---|\n")
	for _, l := range c.Lines {
		m.printf("| %s | %s | %s | %s | %s | %s |\n", code(l.Row), l.USDPerHour, l.PerMOutput, l.PerMTotal, l.OutputPerUSD, l.OutputPerSPerGPU)
	}
	m.printf("\n%s\n\n", c.Ranking)
}

// htmlCost is the Cost section as report.html shows it.
type htmlCost struct {
	Intro   string
	Lines   []record.CostLine
	Ranking []seg
}

func htmlCostOf(sum *metrics.Summary, d *verdict.Decision) *htmlCost {
	c := record.CostOf(sum, d)
	if c == nil {
		return nil
	}
	return &htmlCost{Intro: record.CostIntro, Lines: c.Lines, Ranking: mdSegs(c.Ranking)}
}
