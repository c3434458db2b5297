package telemetry

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixture parses a captured exposition into a sample, as a scrape would.
func fixture(t *testing.T, name string) Sample {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	fams, err := decode(body, http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	s := Sample{Target: name, Kind: KindServer}
	s.Mapping, s.Series = extract(fams)
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestFixturesMapIntoTheVocabulary reads each engine's documented
// exposition and checks every figure the vocabulary takes from it: the
// right family, its series summed or averaged, the renamed and the
// unpublished ones.
func TestFixturesMapIntoTheVocabulary(t *testing.T) {
	type want struct {
		vals   map[quantity]float64 // absent from the map: must be absent
		counts map[quantity]float64 // histogram observation counts
	}
	cases := []struct {
		file, mapping string
		want          want
	}{
		{"vllm.prom", "vllm", want{
			// Two data-parallel engines: counts and counters summed,
			// KV usage averaged; kv_cache_usage_perc preferred to the
			// deprecated gpu_cache_usage_perc.
			vals: map[quantity]float64{qRunning: 4, qWaiting: 2, qKVUsage: 0.5, qPrefixQueries: 1200,
				qPrefixHits: 300, qPreemptions: 1, qPromptTokens: 5000, qGenerationTokens: 2500},
			counts: map[quantity]float64{qTTFT: 50, qTPOT: 25, qITL: 1475, qE2E: 25, qQueue: 25},
		}},
		{"sglang.prom", "sglang", want{
			vals: map[quantity]float64{qRunning: 162, qWaiting: 2826, qKVUsage: 0.28, qPrefixQueries: 8128902,
				qPrefixHits: 61026, qPreemptions: 7, qPromptTokens: 8128902, qGenerationTokens: 7557572},
			counts: map[quantity]float64{qTTFT: 11008, qITL: 7400757, qE2E: 11228, qQueue: 11228},
		}},
		{"tgi.prom", "tgi", want{
			// Token counts from the per-request histograms' sums.
			vals:   map[quantity]float64{qRunning: 8, qWaiting: 5, qPromptTokens: 31625, qGenerationTokens: 32500},
			counts: map[quantity]float64{qTPOT: 250, qE2E: 250, qQueue: 250},
		}},
		{"llamacpp.prom", "llama.cpp", want{
			// A real llama-server: prompt tokens are the evaluated
			// plus the reused ones (35155 + 1461), the prefix-cache
			// hits the reused ones; no KV figure.
			vals: map[quantity]float64{qRunning: 4, qWaiting: 4, qPrefixQueries: 36616, qPrefixHits: 1461,
				qPromptTokens: 36616, qGenerationTokens: 12768},
		}},
		{"llamacpp-older.prom", "llama.cpp", want{
			// An older build: its KV ratio, and only the evaluated
			// prompt tokens (read, marked partial).
			vals: map[quantity]float64{qRunning: 2, qWaiting: 1, qKVUsage: 0.25, qPromptTokens: 6886, qGenerationTokens: 3469},
		}},
		{"trtllm.prom", "trtllm", want{
			vals: map[quantity]float64{qRunning: 6, qWaiting: 3, qKVUsage: 0.125, qPrefixQueries: 6400,
				qPrefixHits: 1600, qPromptTokens: 6400, qGenerationTokens: 3200},
			counts: map[quantity]float64{qTTFT: 50, qTPOT: 50, qE2E: 50, qQueue: 50},
		}},
		{"triton-trtllm.prom", "trtllm-triton", want{
			// Selected by label: active and waiting requests, the
			// fraction of blocks in use.
			vals: map[quantity]float64{qRunning: 7, qWaiting: 4, qKVUsage: 0.25},
		}},
		{"nim.prom", "nim", want{
			vals:   map[quantity]float64{qRunning: 5, qWaiting: 1, qKVUsage: 0.75, qPromptTokens: 12000, qGenerationTokens: 6000},
			counts: map[quantity]float64{qTTFT: 40, qITL: 5960, qE2E: 40},
		}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			s := fixture(t, c.file)
			if s.Mapping != c.mapping {
				t.Fatalf("mapping %q, want %q", s.Mapping, c.mapping)
			}
			r := read(&s)
			for q := range numQuantities {
				name := quantityInfo[q].name
				if quantityInfo[q].kind == kindHist {
					w, ok := c.want.counts[q]
					switch {
					case !ok && r.hists[q] != nil:
						t.Errorf("%s read from %s, want it absent", name, r.family[q])
					case ok && r.hists[q] == nil:
						t.Errorf("%s absent, want %v observations", name, w)
					case ok && !near(r.hists[q].count, w):
						t.Errorf("%s has %v observations, want %v", name, r.hists[q].count, w)
					}
					continue
				}
				w, ok := c.want.vals[q]
				switch {
				case !ok && r.vals[q] != nil:
					t.Errorf("%s = %v from %s, want it absent", name, *r.vals[q], r.family[q])
				case ok && r.vals[q] == nil:
					t.Errorf("%s absent, want %v", name, w)
				case ok && !near(*r.vals[q], w):
					t.Errorf("%s = %v, want %v", name, *r.vals[q], w)
				}
			}
			if len(r.gpus) != 0 {
				t.Errorf("GPU figures found in an engine's exposition: %v", r.gpus)
			}
			// Only the families the vocabulary reads are kept.
			fams := s.mappingFamilies()
			for _, sr := range s.Series {
				if !fams[sr.Name] {
					t.Errorf("kept %s, which nothing reads", sr.Name)
				}
			}
		})
	}
}

func (s *Sample) mappingFamilies() map[string]bool {
	if m := mappingByName(s.Mapping); m != nil {
		return m.families()
	}
	return map[string]bool{}
}

// TestLlamaCppPromptTokensWholeOrPartial reads a real llama-server's
// prompt tokens as its evaluated plus its reused ones, whole, and an older
// build's, which has no count of the reused ones, as partial: the token
// check must not compare a count that leaves the reused tokens out.
func TestLlamaCppPromptTokensWholeOrPartial(t *testing.T) {
	s := fixture(t, "llamacpp.prom")
	r := read(&s)
	if r.partial[qPromptTokens] != "" || r.family[qPromptTokens] != "llamacpp:prompt_tokens_total + llamacpp:prompt_tokens_cached_total" {
		t.Errorf("real llama-server: prompt tokens from %q, partial %q", r.family[qPromptTokens], r.partial[qPromptTokens])
	}
	s = fixture(t, "llamacpp-older.prom")
	r = read(&s)
	if r.partial[qPromptTokens] == "" || r.vals[qPrefixQueries] != nil || r.vals[qPrefixHits] != nil {
		t.Errorf("older llama.cpp: prompt tokens partial %q, prefix queries %v, hits %v; want partial, no prefix figures",
			r.partial[qPromptTokens], r.vals[qPrefixQueries], r.vals[qPrefixHits])
	}
}

// TestVLLMRenamedMetricsAreRead checks that an older vLLM, which publishes
// gpu_cache_usage_perc, gpu_prefix_cache_* and time_per_output_token_seconds
// only, is read under those names.
func TestVLLMRenamedMetricsAreRead(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "vllm.prom"))
	if err != nil {
		t.Fatal(err)
	}
	old := string(body)
	for _, drop := range []string{"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"} {
		var keep []string
		for _, line := range strings.Split(old, "\n") {
			if !strings.Contains(line, drop) {
				keep = append(keep, line)
			}
		}
		old = strings.Join(keep, "\n")
	}
	old = strings.ReplaceAll(old, "vllm:prefix_cache_", "vllm:gpu_prefix_cache_")
	fams, err := decode([]byte(old), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	s := Sample{}
	s.Mapping, s.Series = extract(fams)
	r := read(&s)
	if r.family[qKVUsage] != "vllm:gpu_cache_usage_perc" || !near(*r.vals[qKVUsage], 0.5) {
		t.Errorf("KV usage from %q: %v", r.family[qKVUsage], r.vals[qKVUsage])
	}
	if r.family[qPrefixHits] != "vllm:gpu_prefix_cache_hits_total" || !near(*r.vals[qPrefixHits], 300) {
		t.Errorf("prefix hits from %q: %v", r.family[qPrefixHits], r.vals[qPrefixHits])
	}
	if r.family[qITL] != "vllm:time_per_output_token_seconds" || r.hists[qITL].count != 1475 {
		t.Errorf("ITL from %q", r.family[qITL])
	}
}

// TestDCGMFixture reads the exporter's default counters per GPU, in the
// vocabulary's units.
func TestDCGMFixture(t *testing.T) {
	s := fixture(t, "dcgm.prom")
	if s.Mapping != mappingDCGM {
		t.Fatalf("mapping %q, want %q", s.Mapping, mappingDCGM)
	}
	r := read(&s)
	if len(r.gpus) != 2 {
		t.Fatalf("%d GPUs, want 2", len(r.gpus))
	}
	g := r.gpus["GPU-1a2b3c4d-0000-1111-2222-333344445555"]
	if g == nil {
		t.Fatalf("GPU 0 not keyed by its UUID: %v", r.gpus)
	}
	checks := []struct {
		name string
		got  *float64
		want float64
	}{
		{"utilization", g.util, 0.97}, {"mem copy", g.memCopy, 0.54}, {"FB MiB", g.fbMiB, 76000},
		{"power", g.powerW, 512.25}, {"energy mJ", g.energyMJ, 912345678901}, {"SM clock", g.smMHz, 1980},
		{"temperature", g.tempC, 61},
	}
	for _, c := range checks {
		if c.got == nil || !near(*c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if g.id != "0" || g.model != "NVIDIA H100 80GB HBM3" {
		t.Errorf("GPU id %q model %q", g.id, g.model)
	}
	for _, sr := range s.Series {
		if !dcgmFamilies[sr.Name] {
			t.Errorf("kept %s, which nothing reads", sr.Name)
		}
	}
}

// TestOpenMetricsAnswerIsDecoded reads an OpenMetrics answer as the text
// format would have said it: a counter's family is named without _total,
// samples carry timestamps in seconds and exemplars, _created samples,
// UNIT lines and info families exist, and # EOF ends it.
func TestOpenMetricsAnswerIsDecoded(t *testing.T) {
	om := "# HELP vllm:prompt_tokens Number of prefill tokens processed.\n" +
		"# TYPE vllm:prompt_tokens counter\n" +
		"vllm:prompt_tokens_total{model_name=\"m\",note=\"a } # in a label\"} 42.0 1.7e+09 # {trace_id=\"x\"} 1.0\n" +
		"vllm:prompt_tokens_created{model_name=\"m\",note=\"a } # in a label\"} 1.7e+09\n" +
		"# TYPE vllm:cache_config info\n" +
		"vllm:cache_config_info{block_size=\"16\"} 1\n" +
		"# TYPE vllm:num_requests_running gauge\n" +
		"# UNIT vllm:num_requests_running requests\n" +
		"vllm:num_requests_running{model_name=\"m\"} 3.0\n" +
		"# TYPE vllm:time_to_first_token_seconds histogram\n" +
		"vllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 1.0 # {trace_id=\"y\"} 0.05 1.7e+09\n" +
		"vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 2.0\n" +
		"vllm:time_to_first_token_seconds_count{model_name=\"m\"} 2.0\n" +
		"vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.3\n" +
		"vllm:time_to_first_token_seconds_created{model_name=\"m\"} 1.7e+09\n" +
		"# EOF\n" +
		"trailing garbage after EOF\n"
	fams, err := decode([]byte(om), http.Header{"Content-Type": {"application/openmetrics-text; version=1.0.0; charset=utf-8"}})
	if err != nil {
		t.Fatal(err)
	}
	s := Sample{}
	s.Mapping, s.Series = extract(fams)
	r := read(&s)
	if s.Mapping != "vllm" || r.vals[qPromptTokens] == nil || *r.vals[qPromptTokens] != 42 || r.vals[qRunning] == nil || *r.vals[qRunning] != 3 {
		t.Fatalf("mapping %q, series %+v", s.Mapping, s.Series)
	}
	if h := r.hists[qTTFT]; h == nil || h.count != 2 || h.sum != 0.3 || h.counts[0] != 1 {
		t.Fatalf("TTFT %+v", h)
	}
}

// TestGarbageIsAnErrorNeverAPanic feeds the decoder broken expositions:
// each is an error (or an empty reading), never a panic.
func TestGarbageIsAnErrorNeverAPanic(t *testing.T) {
	vllm, err := os.ReadFile(filepath.Join("testdata", "vllm.prom"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{
		"<html><body>404</body></html>",
		"vllm:num_requests_running{model_name=\"m\" 3\n",
		"# TYPE x histogram\nx_bucket{le=\"oops\"} 1\n",
		"# TYPE x counter\nx -1e400\nx 2\n",
		"\x00\xff\xfe garbage",
		string(vllm[:len(vllm)/2]) + "{{{",
	}
	text := http.Header{"Content-Type": {"text/plain; version=0.0.4"}}
	om := http.Header{"Content-Type": {"application/openmetrics-text; version=1.0.0; charset=utf-8"}}
	proto := http.Header{"Content-Type": {"application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"}}
	type input struct {
		body   string
		header http.Header
	}
	var all []input
	for _, in := range inputs {
		all = append(all, input{in, text}, input{in, om}, input{in, proto}, input{in, http.Header{}})
	}
	// Truncations and byte flips of a real exposition.
	for i := 1; i < len(vllm); i += len(vllm) / 40 {
		b := []byte(string(vllm))
		b[i] ^= 0x5a
		all = append(all, input{string(vllm[:i]), text}, input{string(b), text},
			input{string(vllm[:i]), om}, input{string(b), om})
	}
	for _, in := range all {
		fams, err := decode([]byte(in.body), in.header)
		if err != nil {
			continue
		}
		s := Sample{}
		s.Mapping, s.Series = extract(fams)
		read(&s)
	}
	if _, err := decode([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f"), proto); err == nil {
		t.Error("a protobuf answer, never asked for, was decoded")
	}
	if _, err := decode([]byte("<html>no</html>"), http.Header{"Content-Type": {"text/html"}}); err == nil {
		t.Error("an HTML page was read as an exposition")
	}
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"vllm.prom", "dcgm.prom", "tgi.prom"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, h := range []http.Header{{}, {"Content-Type": {"application/openmetrics-text; version=1.0.0; charset=utf-8"}}} {
			fams, err := decode(b, h)
			if err != nil {
				continue
			}
			s := Sample{}
			s.Mapping, s.Series = extract(fams)
			read(&s)
		}
	})
}

// TestSeriesInNameOrder: a scrape's series are listed by family name, so
// that two scrapes of one server give lines that read alike (expfmt hands
// the families over in map order).
func TestSeriesInNameOrder(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "vllm.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var first []string
	for i := 0; i < 5; i++ {
		fams, err := decode(body, http.Header{"Content-Type": []string{"text/plain; version=0.0.4"}})
		if err != nil {
			t.Fatal(err)
		}
		_, series := extract(fams)
		names := make([]string, len(series))
		for j, s := range series {
			names[j] = s.Name
		}
		if !slices.IsSorted(names) {
			t.Fatalf("series not in name order: %v", names)
		}
		if i == 0 {
			first = names
		} else if !slices.Equal(first, names) {
			t.Fatalf("scrape %d lists %v, the first %v", i, names, first)
		}
	}
}
