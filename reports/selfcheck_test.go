package reports

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/internal/judgefixture"
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/rundir"
	"github.com/infermatrix/infermatrix/verdict"
)

// TestMarkdownSelfCheckAndSemantics: decision.md says which semantics the
// numbers follow, with its notes, and its self-check shows each row's CPU
// use, measurement error and token check, flagging a mismatch.
func TestMarkdownSelfCheckAndSemantics(t *testing.T) {
	plan, sum := judgefixture.Judged(t)
	sum.Semantics = metrics.SemVLLM
	sum.SemanticsNotes = metrics.SemanticsNotes(metrics.SemVLLM, metrics.SLO{})
	idle := &sum.Rows[0]
	idle.Semantics = metrics.SemVLLM
	idle.SelfCheck = metrics.SelfCheck{ClientCPU: 0.25, Cores: 2, HostCPU: 0.5, MeasurementErrorMS: 0.12, SharedWithServer: true}
	idle.Tokens = metrics.TokenCheck{
		Input:    metrics.LengthCheck{Requests: 3, Diff: 0.08, Mismatch: true},
		Output:   metrics.LengthCheck{Requests: 3, Diff: 0},
		Mismatch: true, Notes: []string{"input: the server counted 108.0 tokens on average against 100.0 requested"},
	}
	busy := &sum.Rows[1]
	busy.SelfCheck = metrics.SelfCheck{ClientCPU: 0.95, Cores: 2, MeasurementErrorMS: 3, ClientBound: true, Notes: []string{"the client's process used 95% of its 2 cores"}}
	busy.SemanticsNotes = []string{"3 of 3 successful requests have no choice-chunk stamps"}
	var b bytes.Buffer
	in := &Input{Plan: plan, Manifest: &rundir.Manifest{Server: rundir.ServerInfo{Declared: plan.Server}}, Summary: sum, Decision: verdict.Judge(plan, sum)}
	if err := WriteMarkdown(&b, in); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"Definitions: docs/metrics.md, **semantics `vllm`**: as `vllm bench serve` defines them.",
		"Under semantics `vllm`:\n\n- follows vllm bench serve at vLLM commit 02cfb534",
		"- `busy`: 3 of 3 successful requests have no choice-chunk stamps.",
		"| `busy` | client_cpu | the client's process used 95% of its 2 cores (limit 90%)",
		"The built-in server runs in the client's process",
		"| `idle` | — | — | — | 25% of 2 cores (machine 50%) | — / 0.120 | — | unknown | **+8.0% mismatch** | +0.0% | ok |",
		"| `busy` | — | — | — | 95% of 2 cores | — / 3 | — | unknown | — | — | **client-bound**: the client's process used 95% of its 2 cores |",
		"**Token lengths differ from the requested ones:**\n\n- `idle`: input: the server counted 108.0 tokens",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}
	if strings.Contains(md, "| `free` | — |") {
		t.Error("the self-check lists a row with nothing measured about the client")
	}

	b.Reset()
	if err := WriteCSV(&b, sum, in.Decision); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	line := recs[1]
	if line[col["client_cpu"]] != "0.25" || line[col["input_tokens_diff"]] != "0.08" || line[col["tokens_mismatch"]] != "true" || line[col["semantics"]] != metrics.SemVLLM {
		t.Errorf("idle line: cpu %q, input diff %q, mismatch %q", line[col["client_cpu"]], line[col["input_tokens_diff"]], line[col["tokens_mismatch"]])
	}
	if free := recs[5]; free[col["client_cpu"]] != "" || free[col["output_tokens_diff"]] != "" {
		t.Errorf("free line: cpu %q, output diff %q; want empty, as nothing was measured", free[col["client_cpu"]], free[col["output_tokens_diff"]])
	}
}
