package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

type result struct {
	code           int
	stdout, stderr string
}

func cli(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(ctx, args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

func TestExitCodes(t *testing.T) {
	closed := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return "http://" + ln.Addr().String() + "/v1"
	}()
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"no command", []string{}, exitOK, nil},
		{"unknown command", []string{"frobnicate"}, exitUsage, []string{`unknown command "frobnicate"`}},
		{"unknown flag", []string{"run", "--turbo", "x.yaml"}, exitUsage, []string{"unknown flag: --turbo"}},
		{"missing argument", []string{"run"}, exitUsage, []string{"accepts 1 arg(s)"}},
		{"missing file", []string{"validate", "testdata/nope.yaml"}, exitInvalid, []string{"nope.yaml"}},
		{"invalid file", []string{"run", "../../schema/testdata/invalid/three-mistakes.yaml"}, exitInvalid,
			[]string{"3 problems; nothing was run"}},
		{"bad dataset line", []string{"run", "testdata/bad-dataset.yaml", "--out", filepath.Join(t.TempDir(), "run")}, exitInvalid,
			[]string{"testdata/bad-dataset.jsonl:2: want \"prompt\"", "nothing was run"}},
		{"unreachable server", []string{"run", "testdata/failing.yaml", "--target", closed}, exitRuntime,
			[]string{"server unreachable"}},
		{"unknown --rows", []string{"plan", "testdata/grid.yaml", "--rows", "gird"}, exitInvalid,
			[]string{`no row "gird"`, "did you mean `grid`?"}},
		{"shard not one of N", []string{"run", "testdata/grid.yaml", "--shard", "3/2"}, exitUsage,
			[]string{"--shard: bad shard 3/2: want 1 <= I <= N"}},
		{"fewer users than shards", []string{"run", "testdata/grid.yaml", "--shard", "1/2", "--out", filepath.Join(t.TempDir(), "run")}, exitUsage,
			[]string{"1 users cannot be divided among 2 shards", "nothing was run"}},
		{"start in the past", []string{"run", "testdata/grid.yaml", "--shard", "1/1", "--start-at", "2020-01-01T00:00:00Z", "--out", filepath.Join(t.TempDir(), "run")}, exitUsage,
			[]string{"--start-at: bad start time: 2020-01-01T00:00:00Z is", "in the past", "nothing was run"}},
		{"sim off loopback", []string{"sim", "--addr", "0.0.0.0:0"}, exitUsage,
			[]string{"not a loopback address", "--listen-any"}},
		{"sim unknown preset", []string{"sim", "--preset", "gpt-5-b300", "--addr", "127.0.0.1:0"}, exitUsage,
			[]string{`unknown simulator preset "gpt-5-b300"`, "llama-3.1-8b-h100"}},
		{"sim ttft with an engine", []string{"sim", "--ttft", "5ms", "--addr", "127.0.0.1:0"}, exitUsage,
			[]string{"--ttft and --itl apply to --preset fixed"}},
		{"sim bad fault", []string{"sim", "--fault", "teapot", "--addr", "127.0.0.1:0"}, exitUsage,
			[]string{`unknown fault kind "teapot"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, context.Background(), tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d; want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
		})
	}
}

// TestValidateReportsEveryProblem is the check: a file with an
// unknown key, a string where a number belongs and an unknown metric gets
// all three reported, with positions, and the invalid-experiment code.
func TestValidateReportsEveryProblem(t *testing.T) {
	f := "../../schema/testdata/invalid/three-mistakes.yaml"
	r := cli(t, context.Background(), "validate", f, "testdata/grid.yaml")
	if r.code != exitInvalid {
		t.Fatalf("exit %d; want %d", r.code, exitInvalid)
	}
	for _, want := range []string{
		f + `:13:5: rows[0].concurency: unknown key "concurency"`,
		"hint: did you mean `concurrency`?",
		f + `:17:24: rows[1].rate.per_second: expected a number, got "fast" (a string)`,
		f + `:20:31: acceptance[0].expect: unknown metric "tpot_p95"`,
		"hint: did you mean `tpot.p95`",
		"1 of 2 files invalid",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "testdata/grid.yaml: ok (6 rows)") {
		t.Errorf("stdout = %q; want the valid file reported ok", r.stdout)
	}
}

func TestPlanListsSweptRows(t *testing.T) {
	r := cli(t, context.Background(), "plan", "testdata/grid.yaml")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows := regexp.MustCompile(`(?m)^grid/c=\d+,in=\d+ `).FindAllString(r.stdout, -1)
	if len(rows) != 6 {
		t.Errorf("plan lists %d swept rows; want 6:\n%s", len(rows), r.stdout)
	}
	for _, want := range []string{"grid/c=8,in=4096", "300 requests", "~ assumes",
		// Where server.* and gpu.* will come from, before anything runs.
		"telemetry: every 1s from http://127.0.0.1:8000/metrics; no DCGM exporter"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestSchemaAcceptsExamples checks that `infermatrix schema` prints a valid
// JSON Schema that accepts every file in experiments/.
func TestSchemaAcceptsExamples(t *testing.T) {
	r := cli(t, context.Background(), "schema")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("infermatrix.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("infermatrix.json")
	if err != nil {
		t.Fatalf("the printed schema does not compile: %v", err)
	}
	files, _ := filepath.Glob("../../experiments/*.yaml")
	if len(files) == 0 {
		t.Fatal("no experiments")
	}
	for _, f := range files {
		v := yamlAsJSON(t, f)
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestVersion(t *testing.T) {
	r := cli(t, context.Background(), "version")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "infermatrix ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, c := range []string{"run", "validate", "plan", "report", "sim", "schema", "version"} {
		r := cli(t, context.Background(), c, "--help")
		if r.code != exitOK || !strings.Contains(r.stdout, "Examples:") {
			t.Errorf("%s --help: exit %d, no examples:\n%s", c, r.code, r.stdout)
		}
	}
}

func TestAcceptanceFailedExitCode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	r := cli(t, context.Background(), "run", "testdata/failing.yaml", "--out", out)
	if r.code != exitAcceptance {
		t.Fatalf("exit %d; want %d\n%s%s", r.code, exitAcceptance, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "verdict: FAIL (1 of 2 judged rows pass)") {
		t.Errorf("stdout = %q", r.stdout)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	for _, want := range []string{
		"**Verdict: FAIL.** 1 of 2 valid judged rows fail acceptance: `impossible`.",
		"| `impossible` | instant | **fail**: `ttft.p50 < 1` with ttft.p50 = ",
		"## Rejected rows",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q:\n%s", want, md)
		}
	}
}

func TestInterruptBeforeTheRunExitCode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := cli(t, ctx, "run", "testdata/failing.yaml", "--out", filepath.Join(t.TempDir(), "run"))
	if r.code != exitInterrupted {
		t.Errorf("exit %d; want %d for an interrupt during start-up\n%s", r.code, exitInterrupted, r.stderr)
	}
}

func TestInterruptExitCode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	r := cli(t, ctx, "run", "testdata/long.yaml", "--out", out)
	if r.code != exitInterrupted {
		t.Fatalf("exit %d; want %d\n%s", r.code, exitInterrupted, r.stderr)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	if !strings.Contains(md, "**Interrupted.**") {
		t.Errorf("decision.md does not say the run was interrupted:\n%s", md)
	}
	var s struct {
		Interrupted bool `json:"interrupted"`
		Rows        []struct {
			Requests struct{ Sent int } `json:"requests"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(readFile(t, filepath.Join(out, "rows", "forever", "requests.jsonl")), "\n")
	if !s.Interrupted || lines == 0 || lines != s.Rows[0].Requests.Sent {
		t.Errorf("interrupted %v, %d records on disk, %d in the summary", s.Interrupted, lines, s.Rows[0].Requests.Sent)
	}
}

// TestQuickstartEndToEnd runs the quickstart as `make demo` does and reads
// the decision record's verdicts.
//
// On a quiet machine it passes and names its operating point. On a busy
// one (this suite under -race, on two cores shared with other work) rows
// may be invalid, and the run INCONCLUSIVE: that is the promise the
// validity checks make, and the test holds them to it. What it never may
// be is FAIL, or invalid for a reason a busy host does not explain: a
// loaded host yields an invalid row, never a wrong figure.
func TestQuickstartEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quickstart (about 30s)")
	}
	out := filepath.Join(t.TempDir(), "run")
	r := cli(t, context.Background(), "run", "../../experiments/quickstart.yaml", "--out", out)
	if r.code != exitOK && r.code != exitInconclusive {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "decision record: "+filepath.Join(out, "decision.md")) {
		t.Errorf("stdout = %q; want the decision record's path", r.stdout)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	var d struct {
		Verdict string
		Rows    []struct {
			ID       string
			Verdict  string
			Validity struct {
				Valid   bool
				Reasons []struct{ Check, Message string }
			}
		}
		OperatingPoints []struct{ Base, Row, Verdict string } `json:"operating_points"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "decision.json"))), &d); err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]string{}
	valid := map[string]bool{}
	for _, rv := range d.Rows {
		verdicts[rv.ID] = rv.Verdict
		valid[rv.ID] = rv.Validity.Valid
		for _, why := range rv.Validity.Reasons {
			switch why.Check {
			case "client_cpu", "dispatch_lag", "client_stall", "bursts", "simulator", "stamp_error":
				t.Logf("%s is invalid on this host: %s: %s", rv.ID, why.Check, why.Message)
			default:
				t.Errorf("%s is invalid for a reason a busy host does not explain: %s: %s", rv.ID, why.Check, why.Message)
			}
		}
	}
	for _, want := range []string{
		"# Decision record: quickstart (SIMULATED)",
		"| H1 | Eight concurrent users get at least four times the output throughput of one.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("decision.md lacks %q", want)
		}
	}
	if r.code == exitOK {
		// The busiest point within the SLO: c=16 on a quiet machine
		// (c=8 would be a slower host that still kept its schedule).
		op := ""
		if len(d.OperatingPoints) == 1 {
			op = d.OperatingPoints[0].Row
		}
		if d.Verdict != "pass" || (op != "sweep/c=16" && op != "sweep/c=8") || verdicts["sweep/c=48"] != "rejected" {
			t.Errorf("verdict %s, operating point %q, c=48 %s; want pass at c=16 with c=48 rejected", d.Verdict, op, verdicts["sweep/c=48"])
		}
		if !strings.Contains(r.stdout, "operating point of sweep: "+op) || !strings.Contains(md, "operating point `"+op+"`") {
			t.Errorf("the operating point is not stated:\n%s", r.stdout)
		}
		if verdicts["arrivals"] != "pass" {
			t.Errorf("arrivals %s; want pass", verdicts["arrivals"])
		}
		// H1 reads two rows without rules of their own (single_user) or
		// below the operating point (sweep/c=8): a busy host can make them
		// invalid without touching the verdict, and H1 is then
		// inconclusive rather than supported.
		h1 := "| **supported** |"
		if !valid["single_user"] || !valid["sweep/c=8"] {
			h1 = "| **inconclusive** | "
		}
		if !strings.Contains(md, h1) {
			t.Errorf("H1 is not %q:\n%s", h1, md)
		}
	} else {
		t.Logf("INCONCLUSIVE on this host: %s", r.stdout)
	}
	for _, f := range []string{"manifest.json", "summary.json", "summary.csv", "decision.json", "report.html", "results.xlsx",
		"experiment.yaml", "experiment.yaml.sha256", "rows/sweep/c=16/requests.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlAsJSON reads a YAML file into the values a JSON Schema validator
// expects.
func yamlAsJSON(t *testing.T, path string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(readFile(t, path)), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMostRequestsFailedExitCode: a run without rules whose requests
// mostly failed is no success: exit 1, and the record says so.
func TestMostRequestsFailedExitCode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	r := cli(t, context.Background(), "run", "testdata/all-fail.yaml", "--out", out)
	if r.code != exitRuntime || !strings.Contains(r.stdout, "most requests failed: 20 of 20") {
		t.Fatalf("exit %d, stdout %q; want %d and the count", r.code, r.stdout, exitRuntime)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	if !strings.Contains(md, "**Most requests failed** (20 of 20)") || !strings.Contains(md, "| `broken` | errors |") {
		t.Errorf("decision.md does not say most requests failed, or the row is not invalid for it:\n%s", md)
	}
}

// TestPartialRunIsInconclusive: `run --rows` leaves rows with rules
// unjudged; the run cannot pass, and exits 5.
func TestPartialRunIsInconclusive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	r := cli(t, context.Background(), "run", "testdata/failing.yaml", "--rows", "fine", "--out", out)
	if r.code != exitInconclusive || !strings.Contains(r.stdout, "verdict: INCONCLUSIVE (with rules but left out of this run (--rows): `impossible`)") {
		t.Errorf("exit %d, stdout %q; want %d, naming the row left out", r.code, r.stdout, exitInconclusive)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	if !strings.Contains(md, "| `impossible` | | | | | | skipped | — |") {
		t.Errorf("the workload matrix does not show the skipped row:\n%s", md)
	}
}

// TestKVExhaustionDiagnosed drives the built-in server out of KV cache, as
// a user would find it on a real server: the row's rule on
// server.preemptions is judged and fails with the count quoted, the
// Diagnosis names the preemptions and the full cache, and the raw samples
// are in the run directory.
func TestKVExhaustionDiagnosed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	r := cli(t, context.Background(), "run", "testdata/kv-exhaustion.yaml", "--out", out)
	if r.code != exitAcceptance {
		t.Fatalf("exit %d; want %d\n%s%s", r.code, exitAcceptance, r.stdout, r.stderr)
	}
	md := readFile(t, filepath.Join(out, "decision.md"))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile("\\| `full` \\| kv \\| \\*\\*fail\\*\\*: `server.preemptions == 0` with server.preemptions = [1-9]"),
		regexp.MustCompile("## Server and GPU"),
		regexp.MustCompile("- \\*\\*`full`: KV-cache capacity\\*\\* \\(fail\\)\\. The server preempted [0-9,]+ sequences"),
		regexp.MustCompile("`server.kv_cache_usage` mean [0-9]+%, max (9[5-9]|100)%"),
	} {
		if !want.MatchString(md) {
			t.Errorf("decision.md lacks %s:\n%s", want, md)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "rows", "full", "telemetry.jsonl")); err != nil || fi.Size() == 0 {
		t.Errorf("telemetry.jsonl: %v", err)
	}
}
