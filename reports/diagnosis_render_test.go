package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/verdict"
)

// hostileNote is a telemetry note as a server could make it: a metric name
// or error text with markup, a table pipe and an escape sequence.
const hostileNote = "scrape failed: <script>alert(1)</script> | [x](http://evil.example) \x1b[2J"

// diagnosedInput is the spreadsheet fixture with telemetry on two rows:
// sat/c=8 preempted and queued, chat is healthy; sat/c=1 and sat/c=4 have
// none.
func diagnosedInput(t *testing.T) *Input {
	in := xlsxInput(t)
	f := func(v float64) *float64 { return &v }
	for i := range in.Summary.Rows {
		rs := &in.Summary.Rows[i]
		switch rs.ID {
		case "sat/c=8":
			rs.Metrics.TTFT = metrics.NewDist([]float64{100, 110, 120, 130, 2000}, nil)
			rs.Server = &metrics.ServerTelemetry{Scrapes: 12, Failed: 1,
				KVCacheUsage:       &metrics.Gauge{Mean: 0.91, Min: 0.4, Max: 0.99, Samples: 12},
				NumRequestsRunning: &metrics.Gauge{Mean: 6.5, Min: 2, Max: 8, Samples: 12},
				NumRequestsWaiting: &metrics.Gauge{Mean: 2.5, Min: 0, Max: 6, Samples: 12},
				Preemptions:        f(7), PrefixCacheHitRate: f(0.125), PrefixCacheQueries: f(8000),
				TTFT:    &metrics.ServerDist{Count: 5, Mean: 410, P50: 95, P95: 1900},
				TTFTGap: &metrics.Gap{Mean: 12.5, P50: 15, P95: 20},
				Tokens: &metrics.CounterCheck{Mismatch: true, Prompt: metrics.CounterDiff{Server: 160, Records: 80, Diff: 1, Compared: true},
					Notes: []string{"prompt counter differs"}},
				Notes: []string{hostileNote}}
			rs.GPU = &metrics.GPUTelemetry{GPUs: 2, Scrapes: 12, Utilization: &metrics.Gauge{Mean: 0.75, Max: 1, Samples: 24},
				PowerW: &metrics.Gauge{Mean: 900, Max: 1300, Samples: 12}, MemoryUsedGB: &metrics.Gauge{Mean: 70.5, Max: 75.25, Samples: 24}}
		case "chat":
			rs.Server = &metrics.ServerTelemetry{Scrapes: 10, NumRequestsWaiting: &metrics.Gauge{Samples: 10}, Preemptions: f(0)}
		}
	}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	in.Analysis.Diagnosis = nil
	return in
}

// TestTelemetryRendered: every format shows the Server and GPU figures and
// the same findings, with server text escaped.
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

	f := openXLSX(t, renderXLSX(t, in))
	if got := cellValue(t, f, "Telemetry", "A1"); got != "Row" {
		t.Errorf("Telemetry!A1 = %q; want the header", got)
	}
	rows, err := f.GetRows("Telemetry")
	if err != nil {
		t.Fatal(err)
	}
	var line []string
	for _, r := range rows {
		if len(r) > 0 && r[0] == "sat/c=8" {
			line = r
		}
	}
	if len(line) < 12 || line[1] != "12" || line[11] != "7" {
		t.Errorf("Telemetry line of sat/c=8 = %q; want 12 scrapes and 7 preemptions", line)
	}
	diag, err := f.GetRows("Diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	if len(diag) < 2 || diag[0][0] != "Row" || diag[1][0] != "sat/c=8" || diag[1][1] != "fail" || strings.Contains(diag[1][4], "`") {
		t.Errorf("Diagnosis sheet = %q; want a header, then sat/c=8's findings without code marks", diag)
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
