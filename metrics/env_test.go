package metrics

import (
	"reflect"
	"strings"
	"testing"
)

func TestCompileRowNames(t *testing.T) {
	tests := []struct {
		src      string
		wantMsg  string // "" = compiles
		wantHint string
	}{
		{"ttft.p95 < 1000 && tpot.p95 < 40 && goodput.ratio >= 0.95", "", ""},
		{"p(ttft, 75) < 100 and errors.total == 0", "", ""},
		{"throughput.output_tokens_per_s > 100 * requests.completed", "", ""},
		{"let t = ttft.p95; t < 3", "", ""},
		{"ttft_p95 < 1000", `unknown metric "ttft_p95"`, "did you mean `ttft.p95`"},
		{"tpot.p96 < 40", `unknown metric "tpot.p96"`, "write p(tpot, 96)"},
		{"errors.timout == 0", `unknown metric "errors.timout"`, "did you mean `errors.timeout`?"},
		{"ttft < 5", "mismatched types", "pick a statistic"},
		{"ttft.p95", "expected bool", "compare it with a threshold"},
		{"", "empty expression", ""},
	}
	for _, tt := range tests {
		_, probs := CompileRow(tt.src)
		if tt.wantMsg == "" {
			if len(probs) > 0 {
				t.Errorf("CompileRow(%q) = %+v; want no problems", tt.src, probs)
			}
			continue
		}
		if len(probs) != 1 || !strings.Contains(probs[0].Message, tt.wantMsg) || !strings.Contains(probs[0].Hint, tt.wantHint) {
			t.Errorf("CompileRow(%q) = %+v; want one problem with %q, hint %q", tt.src, probs, tt.wantMsg, tt.wantHint)
		}
	}
}

func TestProblemOffsets(t *testing.T) {
	_, probs := CompileRow("ttft.p95 < 500 && tpot_p95 < 40")
	if len(probs) != 1 || probs[0].From != 18 {
		t.Errorf("problems = %+v; want one at offset 18, where tpot_p95 starts", probs)
	}
}

func TestRunAndOperands(t *testing.T) {
	s := &RowSummary{Metrics: Metrics{TTFT: NewDist([]float64{10, 20, 30, 40, 50}, nil)}}
	s.Errors.ByClass = map[string]int{ErrTimeout: 2}
	s.Errors.Total = 2
	env := NewRowEnv(s)
	p, probs := CompileRow("p(ttft, 25) == 20 && errors.timeout == 2 && ttft.max == 50")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if ok, err := p.Run(env); !ok || err != nil {
		t.Errorf("Run = %v, %v; want true", ok, err)
	}
	if got := p.Conjuncts(); len(got) != 3 || got[1] != "errors.timeout == 2" {
		t.Errorf("Conjuncts = %q", got)
	}
	var texts []string
	for _, o := range Operands(`rows.a.ttft.p95 > 2 * rows["b/c=1"].ttft.p95 && p(rows.a.itl, 90) < 5`) {
		texts = append(texts, o.Text+" "+strings.Join(o.Path, "/"))
	}
	want := []string{"rows.a.ttft.p95 rows/a/ttft/p95", `rows["b/c=1"].ttft.p95 rows/b/c=1/ttft/p95`, "p(rows.a.itl, 90) rows/a/itl"}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("Operands = %q; want %q", texts, want)
	}
	v, err := Value("p(ttft, 25)", env)
	if err != nil || v != 20.0 {
		t.Errorf("Value = %v, %v; want 20", v, err)
	}
}

func TestHypothesisRows(t *testing.T) {
	ids := []string{"short", "long", "sat/c=1", "sat/c=8"}
	swept := map[string][]string{"sat": {"sat/c=1", "sat/c=8"}}
	if _, probs := CompileHypothesis(`rows.long.ttft.p95 > 2 * rows.short.ttft.p95 && rows["sat/c=8"].tpot.p50 > 0`, ids, swept); len(probs) > 0 {
		t.Errorf("valid hypothesis: %+v", probs)
	}
	_, probs := CompileHypothesis("rows.sat.ttft.p95 > 1", ids, swept)
	if len(probs) != 1 || !strings.Contains(probs[0].Hint, `rows["sat/c=8"]`) {
		t.Errorf("swept base id: %+v; want a hint naming an expanded row", probs)
	}
}

func TestRowNames(t *testing.T) {
	names := strings.Join(RowNames(), " ")
	for _, n := range []string{"ttft.p95", "tpot.p99", "itl.mean", "e2e.max", "throughput.output_tokens_per_s", "goodput.ratio", "errors.total", "requests.completed"} {
		if !strings.Contains(" "+names+" ", " "+n+" ") {
			t.Errorf("RowNames lacks %s", n)
		}
	}
}

// TestSelfCheckAndTokenNames: rules can read the client self-check and the
// token-length check.
func TestSelfCheckAndTokenNames(t *testing.T) {
	s := &RowSummary{
		SelfCheck: SelfCheck{ClientCPU: 0.4, MeasurementErrorMS: 0.2},
		Tokens:    TokenCheck{Mismatch: true, Input: LengthCheck{Diff: 0.08}, Output: LengthCheck{Diff: -0.01}},
	}
	for src, want := range map[string]bool{
		"!self_check.client_bound && self_check.cpu < 0.9 && self_check.measurement_error_ms < 1": true,
		"tokens.mismatch":                 true,
		"tokens.input_diff > 0.05":        true,
		"abs(tokens.output_diff) <= 0.05": true,
		"self_check.cpu >= 0.9":           false,
	} {
		p, probs := CompileRow(src)
		if len(probs) > 0 {
			t.Fatalf("CompileRow(%q) = %+v", src, probs)
		}
		if got, err := p.Run(NewRowEnv(s)); got != want || err != nil {
			t.Errorf("%s = %v, %v; want %v", src, got, err, want)
		}
	}
}

// TestRulesArePure checks that functions reading the clock, the time zone
// or the file system are refused, in acceptance rules and hypotheses, at
// the offset of the call, while pure builtins such as duration stay usable.
func TestRulesArePure(t *testing.T) {
	tests := []struct {
		src      string
		wantFrom int    // offset of the refused call; -1 = compiles
		wantWhy  string // what the call depends on
	}{
		{"now().Year() > 2000", 0, "clock"},
		{"1 < 2 && now().Hour() < 12", 9, "clock"},
		{"date('2020-01-01').Year() > 2000", 0, "time zone"},
		{"timezone('UTC') != nil", 0, "time zone database"},
		{"(now() | date()) != nil", 1, "clock"},
		{"duration('1s') > duration('0s') && abs(ttft.p95) < 1", -1, ""},
	}
	for _, tt := range tests {
		for name, compile := range map[string]func(string) []ExprProblem{
			"CompileRow": func(s string) []ExprProblem { _, p := CompileRow(s); return p },
			"CompileHypothesis": func(s string) []ExprProblem {
				_, p := CompileHypothesis(strings.ReplaceAll(s, "ttft.p95", "rows.a.ttft.p95"), []string{"a"}, nil)
				return p
			},
		} {
			probs := compile(tt.src)
			if tt.wantFrom < 0 {
				if len(probs) > 0 {
					t.Errorf("%s(%q) = %+v; want no problems", name, tt.src, probs)
				}
				continue
			}
			if len(probs) == 0 {
				t.Errorf("%s(%q) compiles; want it refused as impure", name, tt.src)
				continue
			}
			p := probs[0]
			if p.From != tt.wantFrom || !strings.Contains(p.Message, "same verdict whenever they are judged") || !strings.Contains(p.Message, tt.wantWhy) {
				t.Errorf("%s(%q) = %+v; want at %d a problem saying it depends on the %s", name, tt.src, p, tt.wantFrom, tt.wantWhy)
			}
		}
	}
	// The compiler refuses them too, should a caller skip the name check.
	for _, f := range []string{"now", "date", "timezone"} {
		if _, err := Value(f+"()", RowEnv{}); err == nil {
			t.Errorf("Value(%s()) evaluated; want the builtin disabled", f)
		}
	}
}
