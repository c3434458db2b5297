package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

// completionLength asks for a completion and returns its length by usage,
// its length by re-tokenizing the text, and its finish reason.
func completionLength(t *testing.T, inst *Instance, body string) (usageN, textN int, reason string) {
	t.Helper()
	resp := request(t, inst.BaseURL+"/completions", body, "")
	var r textResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, %v", body, resp.StatusCode, err)
	}
	tok := builtinTokenizer(t)
	return r.Usage.CompletionTokens, tok.Count(r.Choices[0].Text), r.Choices[0].FinishReason
}

// TestEOSDeterministic checks that a seeded request stops at the same length
// on every server with the same Config.Seed, and that lengths vary between
// seeds.
func TestEOSDeterministic(t *testing.T) {
	cfg := Config{TTFT: time.Nanosecond, ITL: time.Nanosecond, Seed: 3, EOSMeanTokens: 8}
	a, b := startSim(t, cfg), startSim(t, cfg)
	const max = 40
	lengths := map[int]bool{}
	for seed := range 20 {
		body := fmt.Sprintf(`{"prompt":"hi","max_tokens":%d,"seed":%d}`, max, seed)
		n1, text1, reason1 := completionLength(t, a, body)
		n2, _, reason2 := completionLength(t, b, body)
		n3, _, _ := completionLength(t, a, body) // the same server again
		if n1 != n2 || n1 != n3 || reason1 != reason2 {
			t.Errorf("seed %d: lengths %d, %d, %d (%s, %s); want one", seed, n1, n2, n3, reason1, reason2)
		}
		if text1 != n1 {
			t.Errorf("seed %d: usage says %d tokens, the text has %d", seed, n1, text1)
		}
		if wantReason := map[bool]string{true: "stop", false: "length"}[n1 < max]; reason1 != wantReason {
			t.Errorf("seed %d: %d tokens finished %q, want %q", seed, n1, reason1, wantReason)
		}
		lengths[n1] = true
	}
	if len(lengths) < 5 {
		t.Errorf("20 seeds gave only the lengths %v", lengths)
	}
	other := cfg
	other.Seed = 4
	c := startSim(t, other)
	same := 0
	for seed := range 20 {
		body := fmt.Sprintf(`{"prompt":"hi","max_tokens":%d,"seed":%d}`, max, seed)
		n1, _, _ := completionLength(t, a, body)
		n2, _, _ := completionLength(t, c, body)
		if n1 == n2 {
			same++
		}
	}
	if same == 20 {
		t.Error("Config.Seed 3 and 4 give every request the same length")
	}
}

func TestEOSMinTokensAndIgnoreEOS(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Nanosecond, ITL: time.Nanosecond, EOSMeanTokens: 2})
	for seed := range 10 {
		n, _, reason := completionLength(t, inst, fmt.Sprintf(`{"prompt":"hi","max_tokens":40,"min_tokens":30,"seed":%d}`, seed))
		if n < 30 || n > 40 || (n < 40) != (reason == "stop") {
			t.Errorf("seed %d with min_tokens 30: %d tokens, %q", seed, n, reason)
		}
		n, _, reason = completionLength(t, inst, fmt.Sprintf(`{"prompt":"hi","max_tokens":40,"ignore_eos":true,"seed":%d}`, seed))
		if n != 40 || reason != "length" {
			t.Errorf("seed %d with ignore_eos: %d tokens, %q; want 40, length", seed, n, reason)
		}
	}
	// Off by default: every request runs to max_tokens.
	off := startSim(t, Config{TTFT: time.Nanosecond, ITL: time.Nanosecond})
	if n, _, reason := completionLength(t, off, `{"prompt":"hi","max_tokens":40}`); n != 40 || reason != "length" {
		t.Errorf("without EOS: %d tokens, %q", n, reason)
	}
}

// TestEOSStream checks the stream of a request that stops early: its finish
// chunk says "stop", usage counts the tokens sent, and the success counter
// files it under finished_reason="stop".
func TestEOSStream(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Nanosecond, ITL: time.Nanosecond, EOSMeanTokens: 4})
	tok := builtinTokenizer(t)
	stops := 0
	for seed := range 10 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":50,"seed":%d,"stream":true,"stream_options":{"include_usage":true}}`, seed)
		events := readEvents(t, request(t, inst.BaseURL+"/chat/completions", body, "").Body)
		var text strings.Builder
		var reason string
		var u *usage
		for _, ev := range events[:len(events)-1] {
			c, _ := decodeChunk(t, ev)
			text.WriteString(contentOf(c))
			if len(c.Choices) == 1 && c.Choices[0].FinishReason != nil {
				reason = *c.Choices[0].FinishReason
			}
			if c.Usage != nil {
				u = c.Usage
			}
		}
		n := tok.Count(text.String())
		if u == nil || u.CompletionTokens != n || (n < 50) != (reason == "stop") {
			t.Errorf("seed %d: %d tokens, usage %+v, finish %q", seed, n, u, reason)
		}
		if reason == "stop" {
			stops++
		}
	}
	if stops == 0 {
		t.Fatal("no request stopped early with a mean of 4 tokens")
	}
	if got := seriesValue(t, inst.BaseURL, `vllm:request_success_total{model_name="infermatrix-sim",finished_reason="stop"}`); got != fmt.Sprintf("%d.0", stops) {
		t.Errorf("stop successes %s, want %d", got, stops)
	}
}

// TestNaturalLength checks the draw against its distribution: geometric with
// the configured mean, at least 1, and determined by its keys.
func TestNaturalLength(t *testing.T) {
	const mean, n = 50, 20000
	sum := 0
	for i := range uint64(n) {
		k := naturalLength(1, nil, i, mean)
		if k < 1 {
			t.Fatalf("naturalLength = %d", k)
		}
		sum += k
	}
	// The sample mean's standard error is about sqrt(mean*(mean-1)/n) = 0.35.
	if got := float64(sum) / n; math.Abs(got-mean) > 2.5 {
		t.Errorf("mean natural length %.2f, want about %d", got, mean)
	}
	seed := int64(9)
	if naturalLength(1, &seed, 0, mean) != naturalLength(1, &seed, 12345, mean) {
		t.Error("a seeded draw depends on the arrival number")
	}
	if naturalLength(1, nil, 0, 1) != 1 {
		t.Error("mean 1 must stop after one token")
	}
}

func TestEOSValidated(t *testing.T) {
	if _, err := New(Config{EOSMeanTokens: -1}); err == nil {
		t.Error("New(EOSMeanTokens: -1) succeeded")
	}
}
