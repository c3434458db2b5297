package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/sim"
)

// TestBuiltInServer scrapes the built-in server while it answers a few
// completions: it is recognised, and its token counters agree with the
// usage it reported.
func TestBuiltInServer(t *testing.T) {
	inst, err := sim.Start(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Close() })
	start := time.Now()
	s := Start(context.Background(), Options{
		Targets:  []Target{{URL: strings.TrimSuffix(inst.BaseURL, "/v1") + "/metrics", Kind: KindServer, Display: "sim"}},
		Interval: time.Hour, // Start's and Stop's rounds are enough
		Start:    start,
	})
	s.SetPhase(metrics.PhaseLoad)
	var rec RecordTotals
	for range 3 {
		body := `{"model":"infermatrix-sim","prompt":"Rivers carve valleys","max_tokens":12}`
		resp, err := http.Post(inst.BaseURL+"/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Usage struct {
				PromptTokens     float64 `json:"prompt_tokens"`
				CompletionTokens float64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		rec.Prompt += out.Usage.PromptTokens
		rec.Generation += out.Usage.CompletionTokens
		rec.Requests++
	}
	end := time.Since(start).Nanoseconds()
	all := s.Stop()
	st, _, pts := Reduce(all, ReduceInput{WindowStartNS: all[0].TNS, WindowEndNS: end, Records: &rec})
	if st.Mapping != "infermatrix-sim" {
		t.Fatalf("mapping %q, notes %q", st.Mapping, st.Notes)
	}
	if st.GenerationTokens == nil || *st.GenerationTokens != rec.Generation || rec.Generation == 0 {
		t.Errorf("generation tokens %v, the records %v", st.GenerationTokens, rec.Generation)
	}
	tc := st.Tokens
	if tc == nil || tc.Mismatch || !tc.Prompt.Compared || tc.Prompt.Server != rec.Prompt {
		t.Errorf("token check %+v, records %+v", tc, rec)
	}
	if st.E2E == nil || st.E2E.Count != 3 {
		t.Errorf("E2E %+v, want 3 requests", st.E2E)
	}
	if len(pts) != 2 || pts[1].Phase != metrics.PhaseLoad {
		t.Errorf("points %+v", pts)
	}
}
