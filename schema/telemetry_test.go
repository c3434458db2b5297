package schema

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const telemetryRows = `defaults: {requests: 5, input_tokens: 64, output_tokens: 8, concurrency: 1}
rows: [{id: a}]
`

// TestTelemetryDefaults: a file without a telemetry section scrapes, every
// second, at the default endpoint the runner derives.
func TestTelemetryDefaults(t *testing.T) {
	plan, err := Parse("test.yaml", []byte(header+telemetryRows), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tp := plan.Telemetry
	if !tp.Enabled || tp.Interval.D() != time.Second || len(tp.Metrics) != 0 || len(tp.GPU) != 0 {
		t.Errorf("telemetry plan %+v; want enabled, 1s, default endpoints", tp)
	}
	for base, want := range map[string]string{
		"http://h:8000/v1":          "http://h:8000/metrics",
		"http://h:8000/v1/":         "http://h:8000/metrics",
		"https://gw.example/llm/v1": "https://gw.example/llm/metrics",
		"http://h:8080":             "http://h:8080/metrics",
	} {
		if got := ServerMetricsURL(base); got != want {
			t.Errorf("ServerMetricsURL(%q) = %q; want %q", base, got, want)
		}
	}
}

// TestTelemetryProblems: every bad telemetry setting is reported at once,
// at its key, with credentials in a URL masked rather than echoed.
func TestTelemetryProblems(t *testing.T) {
	body := telemetryRows + `telemetry:
  interval: 10ms
  metrics: ["ftp://h/metrics", "http://user:hunter2@h:8000/metrics", "http://h:8000/metrics?token=abc"]
  gpu: ["http://h:9400/metrics"]
`
	_, err := Parse("test.yaml", []byte(header+body), Options{})
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v; want problems", err)
	}
	want := map[string]string{
		"telemetry.interval":   "out of range",
		"telemetry.metrics[0]": "http://",
		"telemetry.metrics[1]": "credentials",
		"telemetry.metrics[2]": "query",
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Path] = p.Message
		if strings.Contains(p.Message, "hunter2") || strings.Contains(p.Message, "abc") {
			t.Errorf("%s: message %q echoes a secret", p.Path, p.Message)
		}
	}
	for path, frag := range want {
		if !strings.Contains(got[path], frag) {
			t.Errorf("%s: message %q; want it to say %q (all: %v)", path, got[path], frag, ps)
		}
	}
}

// TestTelemetryOffRefusesRules: with telemetry switched off, a rule or
// hypothesis reading server.* or gpu.* could never be judged, so it is
// refused at load time at the column where it reads it.
func TestTelemetryOffRefusesRules(t *testing.T) {
	body := telemetryRows + `telemetry: {enabled: false}
acceptance:
  - name: kv
    expect: ttft.p95 < 500 && server.preemptions == 0
hypotheses:
  - id: H1
    statement: the GPU is busy
    expect: rows.a.gpu.utilization.mean > 0.5
`
	_, err := Parse("test.yaml", []byte(header+body), Options{})
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 2 {
		t.Fatalf("Parse = %v; want two problems", err)
	}
	for _, p := range ps {
		if !strings.Contains(p.Message, "telemetry is switched off") || !strings.Contains(p.Hint, "enabled: false") {
			t.Errorf("%s: %q (hint %q); want it to say telemetry is off and how to fix it", p.Path, p.Message, p.Hint)
		}
	}
	if ps[0].Path != "acceptance[0].expect" || ps[0].Pos.Col != 31 {
		t.Errorf("first problem at %s %v; want acceptance[0].expect col 31", ps[0].Path, ps[0].Pos)
	}
}
