package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/internal/recordfixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/verdict"
)

// xlsxInput is the shared record fixture as the record's input.
func xlsxInput(t testing.TB) *Input {
	return inputOf(recordfixture.New(t))
}

// diagnosedInput is the fixture with telemetry on two rows
// (recordfixture.Diagnosed).
func diagnosedInput(t testing.TB) *Input {
	return inputOf(recordfixture.Diagnosed(t))
}

func inputOf(r *recordfixture.Run) *Input {
	return &Input{Plan: r.Plan, Manifest: r.Manifest, Summary: r.Summary, Decision: r.Decision, Analysis: r.Analysis, Records: r.Records}
}

// TestTelemetryRendered: decision.md and report.html show the Server and
// GPU figures and the same findings, with server text escaped (results.xlsx:
// workbook's TestTelemetrySheets).
func TestTelemetryRendered(t *testing.T) {
	in := diagnosedInput(t)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, in); err != nil {
		t.Fatal(err)
	}
	doc := md.String()
	for _, want := range []string{
		"## Server and GPU",
		"| `sat/c=8` | server 12 (1 failed), GPU 12 | 91% / 99% | 6.5 / 8 | 2.5 / 6 | 12% | **7** | 410 / 1900 | +12.5 | — | — | 75% / 100% (2 GPUs) | 900 / 1300 | 70.5 / 75.2 | **mismatch: prompt +100.0%** |",
		"| `sat/c=1` | no telemetry |",
		"## Diagnosis",
		"- **`sat/c=8`: KV-cache capacity** (fail). The server preempted 7 sequences",
		"- **`sat/c=8`: queueing** (fail).",
		"`server.num_requests_waiting` mean 2.5, max 6",
		"- **`sat/c=8`: counting error** (warn).",
		"Without telemetry, so read from the client's figures and the prediction alone: `sat/c=1`, `sat/c=4`.",
		"Nothing notable in `chat`, `sat/c=1`, `sat/c=4`.",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>", "](http", "\x1b"} {
		if strings.Contains(doc, bad) {
			t.Errorf("decision.md holds %q from a server note unescaped", bad)
		}
	}
	if !strings.Contains(doc, `&lt;script&gt;`) || !strings.Contains(doc, `\|`) {
		t.Errorf("the telemetry note is not shown escaped:\n%s", doc[strings.Index(doc, "Telemetry notes"):])
	}

	page := string(renderHTML(t, in, nil))
	for _, want := range []string{`<section id="server-and-gpu">`, `<a href="#diagnosis">Diagnosis</a>`, `<section id="diagnosis">`,
		`<strong><code>sat/c=8</code>: KV-cache capacity</strong> <span class="badge fail">fail</span>`,
		`<code>server.num_requests_waiting</code> mean 2.5, max 6`, `&lt;script&gt;alert(1)&lt;/script&gt;`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Error("report.html holds a server note's markup unescaped")
	}
}

// TestDiagnosisInEveryRecord: a record without telemetry and without
// findings still has the section, saying what was examined.
func TestDiagnosisInEveryRecord(t *testing.T) {
	in := xlsxInput(t)
	for i := range in.Summary.Rows {
		in.Summary.Rows[i].Metrics.TTFT = metrics.NewDist([]float64{40, 41, 42}, nil)
	}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	in.Analysis = analysis.Analyze(in.Plan, in.Summary, in.Decision)
	if in.Analysis.Diagnosis == nil {
		t.Fatal("Analyze gives no diagnosis")
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, in); err != nil {
		t.Fatal(err)
	}
	doc := md.String()
	if strings.Contains(doc, "## Server and GPU") {
		t.Error("a record without telemetry has a Server and GPU table")
	}
	i := strings.Index(doc, "## Diagnosis")
	if i < 0 {
		t.Fatal("decision.md has no Diagnosis section")
	}
	for _, want := range []string{"No row has server or GPU telemetry", "Examined `chat`, `sat/c=1`, `sat/c=4`, `sat/c=8`: nothing notable found."} {
		if !strings.Contains(doc[i:], want) {
			t.Errorf("the Diagnosis section lacks %q:\n%s", want, doc[i:])
		}
	}
	if !strings.Contains(doc[i:], "Failed their rules with no cause the figures support: `sat/c=8`.") {
		t.Errorf("the failing row without a supported cause is not named:\n%s", doc[i:])
	}
}
