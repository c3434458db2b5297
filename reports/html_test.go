package reports

import (
	"bytes"
	"html"
	"image"
	"image/color"
	"image/png"
	"regexp"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/analysis"
	"github.com/infermatrix/infermatrix/charts"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// Hostile text in every place a server or an experiment writes into the
// page.
const (
	hostileDesc     = `Chat <script>alert("description")</script> & more`
	hostileQuestion = `"><img src=x onerror=alert(1)>`
	hostileError    = `HTTP 502: <img src="http://evil.example/pixel.gif">`
	hostileHeader   = `nginx <svg onload=alert(2)>`
	hostileTitle    = `TTFT <i>by</i> row`
)

// testSVG is a small plot as Plot.SVG holds it, with a prolog, a comment and
// text that must stay inside the image.
const testSVG = `<?xml version="1.0"?>
<!-- a test plot -->
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="240" height="120" viewBox="0 0 240 120">
<rect x="0" y="0" width="240" height="120" fill="#ffffff" stroke="#888888"/>
<polyline points="20,100 80,70 140,40 220,30" fill="none" stroke="#0550ae" stroke-width="2"/>
<text x="20" y="20" font-family="sans-serif" font-size="12">&lt;script&gt;alert(3)&lt;/script&gt;</text>
</svg>
`

func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for x := 0; x < 8; x++ {
		for y := 0; y < 6; y++ {
			img.Set(x, y, color.RGBA{uint8(30 * x), uint8(40 * y), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// htmlInput is the fixture run with hostile strings planted, a prediction,
// a sweep and two plots (SVG, and PNG only).
func htmlInput(t *testing.T) (*Input, []charts.Plot) {
	t.Helper()
	in, _, err := LoadRun(&rundir.Dir{Path: fixtureRun}, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in.Plan.Experiment.Description = hostileDesc
	in.Plan.Rows[0].Question = hostileQuestion
	in.Manifest.Server.Discovered.Server = hostileHeader
	for i := range in.Summary.Rows {
		if in.Summary.Rows[i].ID == "long_prompt" {
			in.Summary.Rows[i].SemanticsNotes = []string{hostileError}
		}
	}
	in.Summary.Rows[0].SelfCheck.Notes = []string{hostileError}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	in.Analysis = analysis.Analyze(in.Plan, in.Summary, in.Decision)
	if len(in.Analysis.Predictions) == 0 {
		in.Analysis.Predictions = []analysis.RowPrediction{{Row: "chat", Context: 260, DecodeTokensPerS: 150.5, TPOTBoundMS: 6.64,
			PrefillBoundMS: 1.9, KVCapacityTokens: 450000, MaxConcurrency: 1700, MeasuredTPOTMS: 11.02, TPOTRatio: 1.66,
			MeasuredTTFTMS: 42.09, TTFTRatio: 22.15, Regime: analysis.RegimeOverhead, Evidence: "TPOT is 1.66× <the bound>"}}
	}
	if len(in.Analysis.Sweeps) == 0 {
		in.Analysis.Sweeps = []analysis.SweepAnalysis{{Base: "sweep", Rows: []string{"sweep/c=1", "sweep/c=4"}, OperatingPoint: "sweep/c=4", Why: "test"}}
	}
	plots := []charts.Plot{
		{Name: "latency-throughput-sweep", Title: hostileTitle, SVG: []byte(testSVG), PNG: testPNG(t)},
		{Name: "ttft-cdf", Title: "TTFT CDF", PNG: testPNG(t)},
	}
	return in, plots
}

func renderHTML(t *testing.T, in *Input, plots []charts.Plot) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, in, plots); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var (
	// Attributes that make a browser fetch or navigate, with their value.
	urlAttr = regexp.MustCompile(`(?i)\s(src|href|srcset|action|formaction|poster|background|data|ping|xlink:href|manifest|cite|longdesc|codebase)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)`)
	cssURL  = regexp.MustCompile(`(?i)url\(|@import`)
	htmlTag = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
)

// TestHTMLSelfContained checks report.html without a browser: it names
// nothing to fetch, runs no script, escapes what the server and the
// experiment wrote, and is the same bytes for the same input.
func TestHTMLSelfContained(t *testing.T) {
	in, plots := htmlInput(t)
	page := renderHTML(t, in, plots)
	if again := renderHTML(t, in, plots); !bytes.Equal(page, again) {
		t.Error("two renderings of the same input differ")
	}
	s := string(page)

	// Escaped text has no "<": every tag found is markup.
	for _, tag := range htmlTag.FindAllString(s, -1) {
		for _, m := range urlAttr.FindAllStringSubmatch(tag, -1) {
			v := html.UnescapeString(strings.Trim(m[2], `"'`))
			if !strings.HasPrefix(v, "#") && !strings.HasPrefix(v, "data:image/svg+xml;base64,") && !strings.HasPrefix(v, "data:image/png;base64,") {
				t.Errorf("%s=%.80s: only in-page links and data: images are allowed", m[1], v)
			}
		}
	}
	if cssURL.MatchString(s) {
		t.Errorf("the styles load something: %s", cssURL.FindString(s))
	}
	if n := strings.Count(strings.ToLower(s), "<script"); n > 0 {
		t.Errorf("the page has %d <script> elements; it needs none", n)
	}
	if !strings.Contains(s, `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`) {
		t.Error("no Content-Security-Policy forbidding other sources")
	}
	for _, bad := range []string{"<script>alert", "<img src=x", `<img src="http://evil`, "<svg onload", "<i>by</i>"} {
		if strings.Contains(s, bad) {
			t.Errorf("unescaped %q in the page", bad)
		}
	}
	for _, good := range []string{"Chat &lt;script&gt;alert(&#34;description&#34;)&lt;/script&gt; &amp; more",
		"&#34;&gt;&lt;img src=x onerror=alert(1)&gt;", "nginx &lt;svg onload=alert(2)&gt;",
		"HTTP 502: &lt;img src=&#34;http://evil.example/pixel.gif&#34;&gt;", "TTFT &lt;i&gt;by&lt;/i&gt; row"} {
		if !strings.Contains(s, good) {
			t.Errorf("the page lacks the escaped text %q", good)
		}
	}
	if n := strings.Count(s, "<img "); n != len(plots) {
		t.Errorf("%d images; want one per plot (%d)", n, len(plots))
	}

	// The sections, in decision.md's order.
	order := []string{"verdict", "hypotheses", "operating-point", "validity", "server-and-run", "workload-matrix", "results",
		"predictions", "acceptance", "rejected-rows", "client-self-check", "plots", "reproduce"}
	last := -1
	for _, id := range order {
		i := strings.Index(s, `<section id="`+id+`">`)
		if i < 0 {
			t.Errorf("no section %s", id)
			continue
		}
		if i < last {
			t.Errorf("section %s is out of order", id)
		}
		last = i
	}
	for _, want := range []string{
		"<strong>Verdict: FAIL</strong> 1 of 4 valid judged rows fail acceptance: <code>long_prompt</code>.",
		`<span class="badge fail">✗ fail</span> <code>ttft.p95 &lt; 200</code> with ttft.p95 = 310.4; <code>errors.total == 0</code> with errors.total = 1`,
		"<tr><th scope=\"row\">Experiment sha256</th><td><code>" + in.Manifest.Experiment.SHA256 + "</code></td></tr>",
		"<tr><th scope=\"row\">Driver</th><td>580.95</td><td>—</td><td></td></tr>",
		"<tr><th scope=\"row\">Engine flags</th><td>max-num-seqs=64</td><td>—</td><td></td></tr>",
		"<tr><th scope=\"row\">GPU</th><td>1 × H100-SXM</td><td>not discovered: no DCGM exporter was scraped (telemetry.gpu)</td><td></td></tr>",
		"<tr><th scope=\"row\">Tool</th><td>infermatrix v0.9.0 (0123456789ab), go1.26.8</td></tr>",
		`<td class="num">42.1 / 42.5 / 42.5</td>`,
		"<pre><code>infermatrix run experiments/golden.yaml</code></pre>",
		`<td class="id"><code>chat</code></td><td class="num">260</td>`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestHTMLNotRunAndInterrupted covers the states a finished run lacks.
func TestHTMLNotRunAndInterrupted(t *testing.T) {
	in, _ := htmlInput(t)
	in.Summary.Interrupted = true
	last := &in.Summary.Rows[len(in.Summary.Rows)-1]
	*last = metrics.RowSummary{ID: last.ID, Base: last.Base, Status: metrics.RowNotRun}
	in.Decision = verdict.Judge(in.Plan, in.Summary)
	s := string(renderHTML(t, in, nil))
	for _, want := range []string{"<strong>Interrupted.</strong>", `<td colspan="10"><span class="badge incomplete">not run</span></td>`} {
		if !strings.Contains(s, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(s, `<section id="plots">`) {
		t.Error("a plots section without plots")
	}
}
