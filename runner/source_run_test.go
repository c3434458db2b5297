package runner

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
)

// shareGPTFile is a ShareGPT dataset with one multi-turn conversation,
// one without a reply, one empty and one that opens with the model's turn
// (workload/source_test.go reads the same file).
const shareGPTFile = `[
  {
    "id": "a",
    "conversations": [
      {"from": "system", "value": "You are helpful."},
      {"from": "human", "value": "Tell me about whales."},
      {"from": "gpt", "value": "Whales are large marine mammals of the order Cetacea."},
      {"from": "human", "value": "And sharks?"},
      {"from": "gpt", "value": "Fish."}
    ]
  },
  {"id": "no-reply", "conversations": [{"from": "human", "value": "Hello?"}]},
  {"id": "empty", "conversations": []},
  {"id": "gpt-first", "conversations": [{"from": "gpt", "value": "Hi."}, {"from": "human", "value": "Hi back."}, {"from": "gpt", "value": "How can I help?"}]}
]
`

// planIn loads an experiment written into dir, with its data files beside
// it, so relative paths resolve as they would for a user.
func planIn(t *testing.T, dir, yaml string, files map[string]string) *schema.Plan {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := schema.Parse(filepath.Join(dir, "exp.yaml"), []byte("apiVersion: infermatrix/v1\nname: t\n"+yaml), schema.Options{})
	if err != nil {
		t.Fatalf("plan:\n%v", err)
	}
	return p
}

// checkInputTokens checks that a record's input count is the same three
// ways: what the workload asked for, what the client counted, and the
// server's usage.
func checkInputTokens(t *testing.T, r metrics.Record, requested int) {
	t.Helper()
	if r.InputTokens.Server == nil || *r.InputTokens.Server != r.InputTokens.Client || r.InputTokens.Requested != requested || r.InputTokens.Client != requested {
		t.Errorf("%s seq %d: input tokens %+v (server %v); want %d everywhere", r.Row, r.Seq, r.InputTokens, deref(r.InputTokens.Server), requested)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

const datasetLines = `{"prompt": "Call me Ishmael. Some years ago, never mind how long precisely.", "max_tokens": 3}
{"messages": [{"role": "system", "content": "You are a sailor."}, {"role": "user", "content": "Describe the Pequod."}], "max_tokens": 5}
{"prompt": "It is a way I have of driving off the spleen.", "output_tokens": 7}
`

// TestDatasetRows runs dataset rows of each format against the built-in
// server: every request is recorded, prompts are used in file order and
// wrap around, output lengths come from the file unless the row sets them,
// and the client's input counts agree exactly with the server's usage.
func TestDatasetRows(t *testing.T) {
	for _, api := range []string{"chat", "completions"} {
		t.Run(api, func(t *testing.T) {
			dir := t.TempDir()
			p := planIn(t, dir, `server: {target: builtin, api: `+api+`, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults: {body: {ignore_eos: true}, unique_prompts: "off"}
rows:
  - {id: jsonl, requests: 7, warmup: 1, concurrency: 2, dataset: {file: data/d.jsonl, format: jsonl}}
  - {id: sharegpt, requests: 4, rate: {per_second: 200}, dataset: {file: sg.json, format: sharegpt}}
  - {id: fixed_out, requests: 3, concurrency: 1, output_tokens: 2, dataset: {file: data/d.jsonl, format: jsonl, shuffle: true}}
  - {id: mooncake, requests: 3, concurrency: 3, dataset: {file: mc.jsonl, format: mooncake}}
`, map[string]string{
				"data/d.jsonl": datasetLines,
				"sg.json":      shareGPTFile,
				"mc.jsonl":     `{"input_length": 700, "output_length": 4, "hash_ids": [1, 2]}` + "\n" + `{"input_length": 600, "output_length": 2, "hash_ids": [1, 3]}` + "\n",
			})
			res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
			if err != nil {
				t.Fatal(err)
			}
			tok := builtinTok(t)
			for _, rs := range res.Summary.Rows {
				recs := records(t, res.Dir, rs.ID)
				if rs.Status != metrics.RowComplete || rs.Requests.Completed != rs.Requests.Sent || len(recs) != rs.Requests.Sent+rs.Requests.Warmup {
					t.Errorf("%s: status %s, %+v, %d records", rs.ID, rs.Status, rs.Requests, len(recs))
				}
				for _, r := range recs {
					if r.Error != nil {
						t.Errorf("%s seq %d: %+v", rs.ID, r.Seq, r.Error)
						continue
					}
					if r.OutputTokens.Server == nil || *r.OutputTokens.Server != r.OutputTokens.Requested {
						t.Errorf("%s seq %d: output %+v (server %v); want what was asked for", rs.ID, r.Seq, r.OutputTokens, deref(r.OutputTokens.Server))
					}
					checkInputTokens(t, r, r.InputTokens.Client)
				}
				switch rs.ID {
				case "jsonl":
					if len(recs) != 8 || rs.Requests.Warmup != 1 {
						t.Errorf("jsonl: %d records, %d warmup; want 7 + 1", len(recs), rs.Requests.Warmup)
					}
					// Lines are used in order and wrap: seq n is line n mod 3.
					want := []int{3, 5, 7}
					ins := []int{tok.Count("Call me Ishmael. Some years ago, never mind how long precisely."),
						tok.Count("You are a sailor.") + tok.Count("Describe the Pequod."),
						tok.Count("It is a way I have of driving off the spleen.")}
					if api == "completions" {
						ins[1] = tok.Count("You are a sailor.\n\nDescribe the Pequod.")
					}
					for _, r := range recs {
						if r.OutputTokens.Requested != want[r.Seq%3] || r.InputTokens.Client != ins[r.Seq%3] {
							t.Errorf("jsonl seq %d: asked %d output tokens for %d input; want line %d's %d and %d",
								r.Seq, r.OutputTokens.Requested, r.InputTokens.Client, r.Seq%3+1, want[r.Seq%3], ins[r.Seq%3])
						}
					}
				case "sharegpt":
					// Two usable conversations, their replies' lengths as output.
					outs := []int{tok.Count("Whales are large marine mammals of the order Cetacea."), tok.Count("How can I help?")}
					ins := []int{tok.Count("Tell me about whales."), tok.Count("Hi back.")}
					for _, r := range recs {
						if r.OutputTokens.Requested != outs[r.Seq%2] || r.InputTokens.Client != ins[r.Seq%2] {
							t.Errorf("sharegpt seq %d: %d→%d tokens; want %d→%d", r.Seq, r.InputTokens.Client, r.OutputTokens.Requested, ins[r.Seq%2], outs[r.Seq%2])
						}
					}
				case "fixed_out":
					for _, r := range recs {
						if r.OutputTokens.Requested != 2 {
							t.Errorf("fixed_out seq %d: %d output tokens; the row's output_tokens wins over the file", r.Seq, r.OutputTokens.Requested)
						}
					}
				case "mooncake":
					for _, r := range recs {
						in := []int{700, 600}[r.Seq%2]
						checkInputTokens(t, r, in)
						if out := []int{4, 2}[r.Seq%2]; r.OutputTokens.Requested != out {
							t.Errorf("mooncake seq %d: %d output tokens; want output_length %d", r.Seq, r.OutputTokens.Requested, out)
						}
					}
				}
			}
		})
	}
}

// TestBadDatasetSendsNothing: a bad line in the last row's file stops the
// run before the first row sends anything or a run directory exists.
func TestBadDatasetSendsNothing(t *testing.T) {
	dir := t.TempDir()
	p := planIn(t, dir, `server: {target: builtin, sim: {preset: fixed, ttft: 1ms, itl: 1ms}}
rows:
  - {id: ok, requests: 1, concurrency: 1, input_tokens: 8, output_tokens: 8}
  - {id: replay, trace: {file: trace.jsonl}}
`, map[string]string{"trace.jsonl": `{"timestamp": 0, "input_length": 10, "output_length": 5}` + "\n" + `{"timestamp": 5, "input_length": 10}` + "\n"})
	out := filepath.Join(dir, "run")
	_, err := Run(context.Background(), p, Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), "row replay: trace file "+filepath.Join(dir, "trace.jsonl")+": 1 problem") ||
		!strings.Contains(err.Error(), "trace.jsonl:2: output_length: missing") {
		t.Errorf("err = %v; want the bad line named", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a run directory was created for a refused plan")
	}
}

// traceLines writes Mooncake lines at these timestamps (ms), each with the
// given input and output lengths.
func traceLines(ts []float64, in, out []int) string {
	var b strings.Builder
	for i := range ts {
		fmt.Fprintf(&b, `{"timestamp": %g, "input_length": %d, "output_length": %d, "hash_ids": [%d]}`+"\n", ts[i], in[i], out[i], i%2)
	}
	return b.String()
}

// TestTraceRows replays traces against the built-in server: each request
// is scheduled at its timestamp over the speed-up, sent on time whatever
// earlier requests do, and has exactly the trace's lengths; warmup,
// request counts and the concurrency cap apply as in any open-loop row.
func TestTraceRows(t *testing.T) {
	dir := t.TempDir()
	ts := []float64{0, 40, 40, 100, 180, 300}
	in := []int{50, 300, 20, 513, 64, 1}
	out := []int{3, 8, 2, 5, 40, 1}
	p := planIn(t, dir, `server: {target: builtin, sim: {preset: fixed, ttft: 2ms, itl: 1ms}}
defaults: {body: {ignore_eos: true}}
rows:
  - {id: replay, warmup: 1, trace: {file: trace.jsonl, speedup: 2, block_size: 16}}
  - {id: first3, requests: 3, trace: {file: trace.jsonl, speedup: 2, block_size: 16}}
  - {id: capped, trace: {file: burst.jsonl, max_concurrency: 1}}
`, map[string]string{
		"trace.jsonl": traceLines(ts, in, out),
		"burst.jsonl": traceLines([]float64{0, 0, 0}, []int{10, 10, 10}, []int{30, 30, 30}),
	})
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	replay := res.Summary.Row("replay")
	if replay.Status != metrics.RowComplete || replay.Requests.Sent != 5 || replay.Requests.Warmup != 1 || replay.Requests.Completed != 5 {
		t.Errorf("replay: %s %+v; want the trace's 6 requests, the first one warmup", replay.Status, replay.Requests)
	}
	for _, r := range records(t, res.Dir, "replay") {
		i := r.Seq
		if r.Error != nil {
			t.Errorf("replay seq %d: %+v", i, r.Error)
			continue
		}
		if r.Warmup != (i == 0) {
			t.Errorf("replay seq %d: warmup %v", i, r.Warmup)
		}
		if want := replay.ScheduleStartNS + int64(ts[i]/2*1e6); r.ScheduledNS != want {
			t.Errorf("replay seq %d: scheduled at %v; want %v", i, time.Duration(r.ScheduledNS), time.Duration(want))
		}
		// Open loop: sent on time, not after the previous request.
		if lag := time.Duration(r.StartNS - r.QueueNS - r.ScheduledNS); lag < 0 || lag > 30*time.Millisecond {
			t.Errorf("replay seq %d: dispatched %v after its time", i, lag)
		}
		checkInputTokens(t, r, in[i])
		if r.OutputTokens.Requested != out[i] || r.OutputTokens.Server == nil || *r.OutputTokens.Server != out[i] {
			t.Errorf("replay seq %d: output %+v; want %d", i, r.OutputTokens, out[i])
		}
	}
	if s := res.Summary.Row("first3"); s.Requests.Sent != 3 || len(records(t, res.Dir, "first3")) != 3 {
		t.Errorf("first3: %+v; want the row's requests to stop the trace after 3", s.Requests)
	}
	// Three requests due at once under a cap of one: each waits for the
	// one before (about 32ms each), and the wait is queue time, not lag.
	capped := records(t, res.Dir, "capped")
	if len(capped) != 3 {
		t.Fatalf("capped: %d records", len(capped))
	}
	for _, r := range capped {
		if start := res.Summary.Row("capped").ScheduleStartNS; r.ScheduledNS != start {
			t.Errorf("capped seq %d: scheduled at %d; the trace says 0, from the schedule's start at %d", r.Seq, r.ScheduledNS, start)
		}
		if lag := time.Duration(r.StartNS - r.QueueNS - r.ScheduledNS); lag < 0 || lag > 30*time.Millisecond {
			t.Errorf("capped seq %d: lag %v beside queue %v", r.Seq, lag, time.Duration(r.QueueNS))
		}
	}
	if q := time.Duration(capped[2].QueueNS); q < 40*time.Millisecond {
		t.Errorf("third capped request queued %v; want about two requests' time", q)
	}
}

// scrapeMetric reads one counter of the built-in server's /metrics.
func scrapeMetric(t *testing.T, baseURL, name string) float64 {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(baseURL, "/v1") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("metric %s missing from /metrics", name)
	return 0
}

// TestTraceHitsThePrefixCache replays a trace whose requests share leading
// hash ids against the built-in engine model, which caches prefixes as
// vLLM does: the shared blocks are byte-identical text, so the server's
// prefix cache hits on them, and only on them.
func TestTraceHitsThePrefixCache(t *testing.T) {
	inst := startPreset(t, "qwen3-0.6b-h200")
	const trace = `{"timestamp": 0, "input_length": 256, "output_length": 2, "hash_ids": [1, 2, 3, 4]}
{"timestamp": 150, "input_length": 256, "output_length": 2, "hash_ids": [1, 2, 3, 5]}
{"timestamp": 300, "input_length": 150, "output_length": 2, "hash_ids": [1, 2, 6]}
{"timestamp": 450, "input_length": 128, "output_length": 2, "hash_ids": [7, 8]}
`
	dir := t.TempDir()
	p := planIn(t, dir, fmt.Sprintf(`server: {urls: [%s], model: %s}
rows:
  - {id: replay, trace: {file: trace.jsonl, block_size: 64}}
`, inst.BaseURL, inst.Server.Config().Model), map[string]string{"trace.jsonl": trace})
	before := scrapeMetric(t, inst.BaseURL, "vllm:prefix_cache_hits_total")
	res, err := Run(context.Background(), p, Options{Out: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records(t, res.Dir, "replay") {
		if r.Error != nil {
			t.Fatalf("seq %d: %+v", r.Seq, r.Error)
		}
		// The server counts Qwen3's chat template around the one user
		// message, as vLLM does: "<|im_start|>user\n" before it and
		// "<|im_end|>\n<|im_start|>assistant\n" after, 8 tokens.
		want := []int{256, 256, 150, 128}[r.Seq]
		if r.InputTokens.Requested != want || r.InputTokens.Client != want || r.InputTokens.Server == nil || *r.InputTokens.Server != want+8 {
			t.Errorf("seq %d: input tokens %+v (server %v); want %d asked and counted, %d with the template", r.Seq, r.InputTokens, deref(r.InputTokens.Server), want, want+8)
		}
	}
	hits := scrapeMetric(t, inst.BaseURL, "vllm:prefix_cache_hits_total") - before
	// The second request shares 3 blocks (192 tokens) with the first, the
	// third 2 blocks (128 tokens); the server caches whole 16-token
	// blocks, and a seam may cost one. The last shares nothing.
	if lo, hi := float64(192+128-2*16), float64(192+128); hits < lo || hits > hi {
		t.Errorf("prefix cache hits rose by %v tokens; want between %v and %v", hits, lo, hi)
	}
}
