package telemetry

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/sim"
	simengine "github.com/infermatrix/infermatrix/sim/engine"
)

// simExposition is the built-in server's /metrics after some load: vLLM's
// families with their histograms, and one simulated GPU's DCGM fields.
func simExposition(b *testing.B) []byte {
	b.Helper()
	p, ok := simengine.LookupPreset("tiny-fast")
	if !ok {
		b.Fatal("no tiny-fast preset")
	}
	ec := p.Config
	inst, err := sim.Start(sim.Config{Model: "m", Engine: &ec})
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close()
	for i := 0; i < 8; i++ {
		resp, err := http.Post(inst.BaseURL+"/completions", "application/json",
			strings.NewReader(`{"model":"m","prompt":"hello there","max_tokens":4}`))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(strings.TrimSuffix(inst.BaseURL, "/v1") + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return []byte(sb.String())
}

// BenchmarkDecode is one scrape's parsing and mapping: what the client
// spends per endpoint per interval. Reported per exposition, with its size.
func BenchmarkDecode(b *testing.B) {
	text := http.Header{"Content-Type": []string{"text/plain; version=0.0.4"}}
	vllm, err := os.ReadFile(filepath.Join("testdata", "vllm.prom"))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
	}{{"vllm-fixture", vllm}, {"builtin-server", simExposition(b)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				fams, err := decode(c.body, text)
				if err != nil {
					b.Fatal(err)
				}
				if m, series := extract(fams); m == "" || len(series) == 0 {
					b.Fatal("nothing recognised")
				}
			}
		})
	}
}

// BenchmarkReduce is a row's reduction at its end: an hour of 1 s scrapes
// of one server target serving vLLM's and DCGM's names, 3,600 rounds.
func BenchmarkReduce(b *testing.B) {
	body := simExposition(b)
	fams, err := decode(body, http.Header{"Content-Type": []string{"text/plain; version=0.0.4"}})
	if err != nil {
		b.Fatal(err)
	}
	mapping, series := extract(fams)
	const rounds = 3600
	samples := make([]Sample, rounds)
	for i := range samples {
		samples[i] = Sample{TNS: int64(i) * int64(time.Second), Round: i, Phase: metrics.PhaseLoad,
			Target: "t", Kind: KindServer, Mapping: mapping, Series: series}
	}
	in := ReduceInput{WindowStartNS: int64(time.Second), WindowEndNS: int64(rounds-2) * int64(time.Second),
		Records: &RecordTotals{}, Interval: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		if s, g, _ := Reduce(samples, in); s == nil || g == nil {
			b.Fatal("no figures")
		}
	}
}
