package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestBaselineRendered: decision.md sets row a beside its baseline and
// says why b has none; report.html marks the rules that could not be
// judged as neither pass nor fail.
func TestBaselineRendered(t *testing.T) {
	plan, sum, base := judgefixture.Baseline(t, 21)
	d := verdict.JudgeWith(plan, sum, base)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, &Input{Plan: plan, Manifest: &rundir.Manifest{}, Summary: sum, Decision: d}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"## Baseline", "`runs/held/20260301T101500Z`", "20 → 21 (+5.0%)", "no baseline: baseline row b differs"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("decision.md lacks %q", w)
		}
	}
	// report.html: a rule that was not judged is neither pass nor fail.
	var page bytes.Buffer
	if err := WriteHTML(&page, &Input{Plan: plan, Manifest: &rundir.Manifest{}, Summary: sum, Decision: d}, nil); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, `<span class="badge none">not judged</span>`); n != 3 || strings.Contains(html, "✗ fail") {
		t.Errorf("report.html: %d rules marked not judged (want 3: b, c, d), fail badge shown %v", n, strings.Contains(html, "✗ fail"))
	}
}
