package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/rundir"
)

// TestEmbeddingsRowReport runs a chat row beside an embeddings row on the
// built-in server and reads the decision record: the embeddings row's
// inputs per second are in a column of their own, its TTFT, TPOT and
// output throughputs are absent (—, not 0), its rule on inputs/s is judged,
// and a run whose summaries were lost is rebuilt with the same figures.
func TestEmbeddingsRowReport(t *testing.T) {
	dir := t.TempDir()
	src := `apiVersion: infermatrix/v1
name: pooled
server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults: {input_tokens: 32, output_tokens: 4, requests: 10, concurrency: 2, body: {ignore_eos: true}}
rows:
  - {id: chat}
  - {id: emb, api: embeddings, batch: 8}
validity: {ignore: [client_cpu, client_stall, bursts, simulator, stamp_error, load, steady_state, samples]}
acceptance:
  - {name: embed, rows: [emb], expect: "throughput.inputs_per_s > 0 && e2e.p50 > 0"}
`
	run := runExperiment(t, dir, src)
	in, _, err := judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	emb := in.Decision.Row("emb")
	if emb == nil || len(emb.Rules) != 1 || !emb.Rules[0].Pass {
		t.Fatalf("emb verdict %+v; want its inputs/s rule judged and passed", emb)
	}
	md := markdownOf(t, in)
	if !strings.Contains(md, "| Req/s | Inputs/s | Output tok/s |") {
		t.Errorf("decision.md's results lack the Inputs/s column:\n%s", md)
	}
	row := regexp.MustCompile("(?m)^\\| `emb` \\| 10 / 10 \\| — \\| — \\| — \\| [0-9.]+ / [0-9.]+ / [0-9.]+ \\| [0-9.,]+ \\| [0-9.,]+ \\| — \\| — \\|")
	if !row.MatchString(md) {
		t.Errorf("decision.md's emb row is not E2E, req/s and inputs/s with the rest absent:\n%s", md)
	}
	if !strings.Contains(md, "| API | chat; rows emb: embeddings |") {
		t.Error("decision.md does not say which row called embeddings")
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, in, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), `<th class="num">Inputs/s</th>`) {
		t.Error("report.html lacks the Inputs/s column")
	}

	var c bytes.Buffer
	if err := WriteCSV(&c, in.Summary, in.Decision); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(c.String(), "\n")
	head := strings.Split(lines[0], ",")
	found := false
	for _, line := range lines[1:] {
		cells := strings.Split(line, ",")
		if len(cells) != len(head) || cells[0] != "emb" {
			continue
		}
		found = true
		for i, h := range head {
			if (h == "output_tokens_per_s" || h == "output_tokens_per_s_per_user") && cells[i] != "" {
				t.Errorf("summary.csv: emb's %s is %q; want empty", h, cells[i])
			}
			if h == "inputs_per_s" && cells[i] == "" {
				t.Error("summary.csv: emb's inputs_per_s is empty")
			}
		}
	}

	if !found {
		t.Errorf("summary.csv has no row emb:\n%s", c.String())
	}

	// Rebuilt from the records alone, the row has the same inputs/s.
	want := in.Summary.Row("emb").Throughput.InputsPerS
	if err := os.Remove(filepath.Join(run, rundir.SummaryFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(run, "rows", "emb", "summary.json")); err != nil {
		t.Fatal(err)
	}
	again, _, err := judgeRun(t, run, RerenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Summary.Row("emb").Throughput.InputsPerS; got != want || got <= 0 {
		t.Errorf("rebuilt inputs/s %v, want %v", got, want)
	}
}
