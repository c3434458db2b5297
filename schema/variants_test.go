package schema

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const variantsFile = `apiVersion: infermatrix/v1
name: t
server:
  target: builtin
  sim: {preset: tiny-fast, engine: {max_num_seqs: 32, prefix_caching: true}}
  variants:
    - {name: seqs8, sim: {engine: {max_num_seqs: 8}}}
    - {name: nocache, sim: {engine: {prefix_caching: false}}}
defaults: {requests: 5, input_tokens: 64, output_tokens: 8}
rows:
  - id: sat
    sweep: {concurrency: [1, 4]}
  - {id: one, concurrency: 1}
acceptance:
  - {name: fast, rows: [sat], expect: ttft.p95 < 1000}
  - {name: one-seqs8, rows: ["one@seqs8"], expect: ttft.p95 < 1000}
hypotheses:
  - {id: H1, statement: s, expect: 'rows["one@seqs8"].ttft.p95 > rows["one@nocache"].ttft.p95'}
`

// Every row runs once per variant, variant by variant; a variant's sim
// keys replace server.sim's, false included, and the others are kept.
func TestVariantsExpandRowsAndOverlaySim(t *testing.T) {
	p, err := Parse("test.yaml", []byte(variantsFile), Options{})
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	want := []string{"sat/c=1@seqs8", "sat/c=4@seqs8", "one@seqs8", "sat/c=1@nocache", "sat/c=4@nocache", "one@nocache"}
	if got := ids(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("ids = %q; want %q", got, want)
	}
	if r := p.Rows[0]; r.Base != "sat@seqs8" || r.Variant != "seqs8" {
		t.Errorf("row 0: base %q variant %q; want sat@seqs8, seqs8", r.Base, r.Variant)
	}
	v8, nc := p.Variant("seqs8"), p.Variant("nocache")
	if v8 == nil || nc == nil || !v8.Builtin {
		t.Fatalf("variants = %+v", p.Server.Variants)
	}
	if v8.Sim.Engine.MaxNumSeqs != 8 || !*v8.Sim.Engine.PrefixCaching || v8.Sim.Preset != "tiny-fast" {
		t.Errorf("seqs8 sim = %+v; want max_num_seqs 8, prefix caching kept, preset tiny-fast", v8.Sim.Engine)
	}
	if nc.Sim.Engine.MaxNumSeqs != 32 || *nc.Sim.Engine.PrefixCaching {
		t.Errorf("nocache sim = %+v; want max_num_seqs 32 kept, prefix caching off", nc.Sim.Engine)
	}
	// A rule naming a row as written covers every variant's copy; one
	// naming row@variant only that copy.
	if got := p.Acceptance[0].Rows; !reflect.DeepEqual(got, []string{"sat/c=1@seqs8", "sat/c=4@seqs8", "sat/c=1@nocache", "sat/c=4@nocache"}) {
		t.Errorf("rule sat covers %q", got)
	}
	if got := p.Acceptance[1].Rows; !reflect.DeepEqual(got, []string{"one@seqs8"}) {
		t.Errorf("rule one@seqs8 covers %q", got)
	}
	if p.Hypotheses[0].Program == nil {
		t.Error("hypothesis naming row@variant did not compile")
	}
	// --rows sat selects every variant's sat.
	p, err = Parse("test.yaml", []byte(variantsFile), Options{Rows: []string{"sat"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(p); len(got) != 4 {
		t.Errorf("--rows sat planned %q", got)
	}
}

func TestVariantLaunchDefaults(t *testing.T) {
	p, err := Parse("test.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server:
  variants:
    - name: a
      urls: [http://127.0.0.1:8123/v1/]
      launch: {command: [infermatrix, sim, --addr, "127.0.0.1:8123"], env: {HF_TOKEN: "${HF_TOKEN}"}}
    - name: b
      urls: [http://127.0.0.1:8124/v1]
      launch: {command: [x], ready: {url: "http://127.0.0.1:8124/health", timeout: 5s}, stop: {signal: SIGINT, grace: 1s}}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 4}]
`), Options{})
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	a, b := p.Variant("a"), p.Variant("b")
	if a.Launch.ReadyURL != "http://127.0.0.1:8123/v1/models" || a.Launch.ReadyTimeout.D() != DefaultReadyTimeout ||
		a.Launch.StopSignal != "SIGTERM" || a.Launch.StopGrace.D() != DefaultStopGrace || a.Builtin {
		t.Errorf("a's launch = %+v", a.Launch)
	}
	if b.Launch.ReadyURL != "http://127.0.0.1:8124/health" || b.Launch.ReadyTimeout.D() != 5*time.Second || b.Launch.StopSignal != "SIGINT" {
		t.Errorf("b's launch = %+v", b.Launch)
	}
}

// Bad variants are reported all at once, each at its line and column.
func TestVariantProblems(t *testing.T) {
	_, err := Parse("test.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server:
  target: builtin
  variants:
    - {name: Big}
    - {name: a, sim: {engine: {max_num_seqs: 0.5}}}
    - {name: a}
    - {name: l, urls: [http://127.0.0.1:1/v1], sim: {seed: 3}, launch: {command: [], env: {API_KEY: sk-live-123}}}
    - {name: s, sim: {ttft: 5ms}}
    - {name: k, urls: [http://127.0.0.1:1/v1], launch: {command: [vllm, serve, --api-key, sk-live-456]}}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 4}]
`), Options{})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`test.yaml:6:14: server.variants[0].name: invalid variant name "Big"`,
		`test.yaml:7:46: server.variants[1].sim.engine.max_num_seqs`,
		`test.yaml:8:14: server.variants[2].name: duplicate variant name "a"`,
		`server.variants[3].sim: sim has no effect on a variant with urls or launch`,
		`server.variants[3].launch.command: launch needs a command`,
		`server.variants[3].launch.env.API_KEY: API_KEY looks like a credential`,
		`server.variants[4].sim.ttft`,
		`server.variants[5].launch.command[3]: --api-key is given a literal value`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "sk-live-123") || strings.Contains(msg, "sk-live-456") {
		t.Errorf("the credential is quoted back:\n%s", msg)
	}
}

// A built-in variant with more replicas runs on more GPUs: a price per
// GPU hour scales with them.
func TestVariantPricing(t *testing.T) {
	p, err := Parse("test.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server:
  target: builtin
  sim: {preset: tiny-fast}
  variants: [{name: one}, {name: four, sim: {replicas: 4}}]
cost: {usd_per_gpu_hour: 2}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 4}]
`), Options{})
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	one, four := p.RowPricing(p.Row("r@one")), p.RowPricing(p.Row("r@four"))
	if one.GPUs != 1 || one.USDPerHour != 2 || four.GPUs != 4 || four.USDPerHour != 8 {
		t.Errorf("pricing one %+v, four %+v; want 1 GPU at $2/h and 4 at $8/h", one, four)
	}
}

// TestVariantContext: a row is held to the context of the variant it runs
// under: a variant that shortens max_model_len below the row is refused
// at its own key, while the variant that keeps the default is not.
func TestVariantContext(t *testing.T) {
	_, err := Parse("test.yaml", []byte(`apiVersion: infermatrix/v1
name: t
server:
  target: builtin
  variants:
    - {name: wide}
    - {name: narrow, sim: {max_model_len: 1000}}
rows: [{id: r, requests: 1, concurrency: 1, input_tokens: 2000, output_tokens: 100}]
`), Options{})
	if err == nil {
		t.Fatal("no error: the narrow variant's context is shorter than the row")
	}
	msg := err.Error()
	if !strings.Contains(msg, "test.yaml:7:43: server.variants[1].sim.max_model_len") || !strings.Contains(msg, "row r@narrow asks for 2000 input + 100 output tokens") {
		t.Errorf("want narrow's context refused at its key:\n%s", msg)
	}
	if strings.Contains(msg, "r@wide") {
		t.Errorf("the wide variant is refused too:\n%s", msg)
	}
}
