package schema

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const header = `apiVersion: infermatrix/v1
name: t
server: {target: builtin}
`

func mustParse(t *testing.T, body string, opts Options) *Plan {
	t.Helper()
	p, err := Parse("test.yaml", []byte(header+body), opts)
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return p
}

func ids(p *Plan) []string {
	out := make([]string, len(p.Rows))
	for i, r := range p.Rows {
		out[i] = r.ID
	}
	return out
}

func TestSweepExpansion(t *testing.T) {
	tests := []struct {
		name  string
		sweep string
		want  []string
	}{
		{"concurrency", `{concurrency: [1, 4, 16]}`, []string{"s/c=1", "s/c=4", "s/c=16"}},
		{"rate", `{rate: [0.5, 2]}`, []string{"s/r=0.5", "s/r=2"}},
		// A 2×3 grid: six rows, canonical dimension order whatever the
		// order in the file, first dimension outermost.
		{"grid", `{input_tokens: [128, 512, 2048], concurrency: [1, 8]}`,
			[]string{"s/c=1,in=128", "s/c=1,in=512", "s/c=1,in=2048", "s/c=8,in=128", "s/c=8,in=512", "s/c=8,in=2048"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, `defaults: {requests: 5, input_tokens: 64, output_tokens: 8}
rows:
  - id: s
    sweep: `+tt.sweep+`
`, Options{})
			if got := ids(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ids = %q; want %q", got, tt.want)
			}
			for _, r := range p.Rows {
				if r.Base != "s" {
					t.Errorf("%s: Base = %q; want s", r.ID, r.Base)
				}
			}
		})
	}
}

func TestSweepPointsSetTheRow(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 5, output_tokens: 8}
rows:
  - id: g
    input_tokens: {mean: 64, stddev: 8}
    rate: {arrival: gamma, burstiness: 0.5, max_concurrency: 4}
    sweep: {rate: [2, 8], input_tokens: [100]}
`, Options{})
	r := p.Rows[1]
	if r.ID != "g/r=8,in=100" {
		t.Fatalf("ID = %q", r.ID)
	}
	want := LoadPlan{Mode: ModeRate, Rate: 8, Arrival: "gamma", Burstiness: 0.5, MaxConcurrency: 4}
	if r.Load != want {
		t.Errorf("Load = %+v; want %+v (the sweep sets the rate, the row keeps its arrival settings)", r.Load, want)
	}
	if r.Input.Mean != 100 || r.Input.Stddev != 8 {
		t.Errorf("Input = %+v; want mean 100 from the sweep, stddev 8 from the row", r.Input)
	}
	if r.SweepPoint["rate"] != 8 || r.SweepPoint["input_tokens"] != 100 {
		t.Errorf("SweepPoint = %v", r.SweepPoint)
	}
}

// TestDefaultGroups checks that a row setting one key of a group replaces
// the whole group from defaults: a duration row is not also capped by the
// defaults' request count, and a rate row drops the defaults' concurrency.
func TestDefaultGroups(t *testing.T) {
	p := mustParse(t, `defaults:
  requests: 100
  concurrency: 4
  input_tokens: 64
  output_tokens: 8
  warmup: 3
  timeout: 10s
rows:
  - id: plain
  - id: timed
    duration: 30s
  - id: open
    rate: {per_second: 2}
`, Options{})
	plain, timed, open := p.Rows[0], p.Rows[1], p.Rows[2]
	if plain.Requests != 100 || plain.Load.Concurrency != 4 || plain.Warmup != 3 || plain.Timeout.D() != 10*time.Second {
		t.Errorf("plain = %+v; want every default", plain)
	}
	if timed.Requests != 0 || timed.Duration.D() != 30*time.Second {
		t.Errorf("timed: requests %d, duration %s; want 0 and 30s", timed.Requests, timed.Duration)
	}
	if timed.Load.Concurrency != 4 {
		t.Errorf("timed: concurrency %d; want 4 (load is another group)", timed.Load.Concurrency)
	}
	if open.Load.Mode != ModeRate || open.Load.Concurrency != 0 || open.Load.Arrival != "poisson" {
		t.Errorf("open: load %+v; want poisson rate with no concurrency", open.Load)
	}
}

func TestMapsMergeKeyByKey(t *testing.T) {
	p := mustParse(t, `defaults:
  requests: 1
  concurrency: 1
  input_tokens: 8
  output_tokens: 8
  body: {ignore_eos: true, temperature: 0}
  headers: {X-Team: capacity}
rows:
  - id: a
    body: {temperature: 0.7, top_p: 0.9}
  - id: b
    body: {ignore_eos: null}
    headers: {X-Row: b}
  - id: c
    headers: {X-Team: null}
`, Options{})
	a, b := p.Rows[0], p.Rows[1]
	wantA := map[string]any{"ignore_eos": true, "temperature": 0.7, "top_p": 0.9}
	if !reflect.DeepEqual(a.Body, wantA) {
		t.Errorf("a.Body = %v; want %v", a.Body, wantA)
	}
	wantB := map[string]any{"temperature": int64(0)}
	if !reflect.DeepEqual(b.Body, wantB) {
		t.Errorf("b.Body = %v; want %v (null removes a default key)", b.Body, wantB)
	}
	if b.Headers["X-Team"] != "capacity" || b.Headers["X-Row"] != "b" {
		t.Errorf("b.Headers = %v", b.Headers)
	}
	if _, ok := p.Rows[2].Headers["X-Team"]; ok {
		t.Errorf("c.Headers = %v; want X-Team removed by null", p.Rows[2].Headers)
	}
}

func TestLengthShorthandAndDefaults(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 1, concurrency: 1}
rows:
  - {id: a, input_tokens: 256, output_tokens: {values: [16, 32]}}
`, Options{})
	r := p.Rows[0]
	if !reflect.DeepEqual(r.Input, Length{Mean: 256, Min: 1}) {
		t.Errorf("Input = %+v", r.Input)
	}
	if !reflect.DeepEqual(r.Output.Values, []int{16, 32}) {
		t.Errorf("Output = %+v", r.Output)
	}
	if !r.Streaming || r.Tokenizer != "builtin" || r.Seed != DefaultSeed || r.Grace.D() != DefaultGrace || r.Timeout.D() != DefaultTimeout {
		t.Errorf("defaults not applied: %+v", r)
	}
	if p.Server.API != "chat" || p.Server.Model != "meta-llama/Llama-3.1-8B-Instruct" || !p.Server.Builtin || p.Server.Sim.MaxModelLen != 131072 {
		t.Errorf("server = %+v", p.Server)
	}
	if !reflect.DeepEqual(p.Percentiles, DefaultPercentiles) || !reflect.DeepEqual(p.Formats, DefaultFormats) {
		t.Errorf("report defaults = %v %v", p.Percentiles, p.Formats)
	}
}

func TestYAMLMergeKeys(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 1, output_tokens: 8}
x-chat: &chat {input_tokens: 64, concurrency: 2}
x-big: &big {input_tokens: 4096, concurrency: 16}
rows:
  - {<<: *chat, id: a}
  - {<<: *chat, id: b, concurrency: 8}
  - {<<: [*chat, *big], id: c}
`, Options{})
	if p.Rows[0].Load.Concurrency != 2 || p.Rows[1].Load.Concurrency != 8 || p.Rows[1].Input.Mean != 64 {
		t.Errorf("rows = %+v", p.Rows)
	}
	// In a merge list, earlier mappings win (the YAML merge-key spec).
	if c := p.Rows[2]; c.Input.Mean != 64 || c.Load.Concurrency != 2 {
		t.Errorf("<<: [*chat, *big] gave input %d, concurrency %d; want chat's 64 and 2", c.Input.Mean, c.Load.Concurrency)
	}
}

func TestTokenizerDirectory(t *testing.T) {
	dir := t.TempDir()
	// The directory must hold a tokenizer, or the run would fail on it.
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Parse(dir+"/x.yaml", []byte(header+`rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8, tokenizer: ./}]`), Options{})
	if err != nil {
		t.Fatalf("a tokenizer directory: %v", err)
	}
	if p.Rows[0].Tokenizer != dir {
		t.Errorf("tokenizer = %q; want %q, resolved against the experiment's directory", p.Rows[0].Tokenizer, dir)
	}
}

func TestTargetAndRowsOptions(t *testing.T) {
	body := `defaults: {requests: 1, input_tokens: 8, output_tokens: 8}
rows:
  - {id: one, concurrency: 1}
  - {id: sw, sweep: {concurrency: [1, 2]}}
  - {id: three, concurrency: 3}
`
	p := mustParse(t, body, Options{Target: "http://127.0.0.1:9/v1/", Rows: []string{"sw", "three"}})
	if p.Server.Builtin || !reflect.DeepEqual(p.Server.URLs, []string{"http://127.0.0.1:9/v1"}) {
		t.Errorf("server = %+v; want the --target URL, trailing slash trimmed", p.Server)
	}
	if got, want := ids(p), []string{"sw/c=1", "sw/c=2", "three"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rows = %q; want %q", got, want)
	}
	_, err := Parse("test.yaml", []byte(header+body), Options{Rows: []string{"thre"}})
	if err == nil || !strings.Contains(err.Error(), `no row "thre"`) || !strings.Contains(err.Error(), "did you mean `three`") {
		t.Errorf("--rows thre: err = %v; want a no-row error with a hint", err)
	}
}

func TestAcceptanceRows(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 1, input_tokens: 8, output_tokens: 8}
rows:
  - {id: one, concurrency: 1}
  - {id: sw, sweep: {concurrency: [1, 2]}}
acceptance:
  - {name: all, expect: "ttft.p95 < 1"}
  - {name: some, rows: [sw], expect: "p(ttft, 75) < 1"}
`, Options{})
	if got := p.Acceptance[0].Rows; !reflect.DeepEqual(got, []string{"one", "sw/c=1", "sw/c=2"}) {
		t.Errorf("default rows = %q; want every row", got)
	}
	if got := p.Acceptance[1].Rows; !reflect.DeepEqual(got, []string{"sw/c=1", "sw/c=2"}) {
		t.Errorf("rows [sw] = %q; want its expansions", got)
	}
}

// TestDecodeKeepsScalarText checks that values YAML would read as numbers
// keep their text in string fields: a driver version is not a float.
func TestDecodeKeepsScalarText(t *testing.T) {
	p2, err := Parse("x.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server:
  target: builtin
  engine: {version: 0.10}
  hardware: {driver: 580.90}
rows: [{id: a, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}]
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := p2.Server.Engine.Version; v != "0.10" {
		t.Errorf("engine.version = %q; want \"0.10\"", v)
	}
	if d := p2.Server.Hardware.Driver; d != "580.90" {
		t.Errorf("driver = %q; want \"580.90\"", d)
	}
}

func TestPrefixRaisesDrawnMinimum(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 1, concurrency: 1, output_tokens: 8}
rows:
  - {id: a, input_tokens: {mean: 4096, stddev: 300}, prefix: {length: 2048}}
`, Options{})
	if r := p.Rows[0]; r.Input.Min != 2049 || r.Prefix.Distinct != 1 {
		t.Errorf("input %+v prefix %+v; want min 2049 so every prompt has room after the prefix", r.Input, r.Prefix)
	}
}

func TestEstimateRow(t *testing.T) {
	r := &PlannedRow{Requests: 10, Warmup: 2, Load: LoadPlan{Mode: ModeConcurrency, Concurrency: 4}}
	if got := EstimateRow(r, time.Second); got.Duration != 3*time.Second || !got.Assumed {
		t.Errorf("closed loop: %+v; want 3 rounds of 1s, assumed", got)
	}
	r = &PlannedRow{Requests: 20, Load: LoadPlan{Mode: ModeRate, Rate: 4}}
	if got := EstimateRow(r, time.Second); got.Duration != 6*time.Second || got.Assumed {
		t.Errorf("open loop: %+v; want 20/4 s of arrivals plus 1s for the last request", got)
	}
	r = &PlannedRow{Duration: Duration(time.Minute), Load: LoadPlan{Mode: ModeConcurrency, Concurrency: 1}}
	if got := EstimateRow(r, time.Second); got.Duration != time.Minute {
		t.Errorf("duration row: %+v; want 1m", got)
	}
}
