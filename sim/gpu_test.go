package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// virtualGPUs is a cluster and its GPU model on the virtual clock, loaded
// with users requests of a long prompt and a long output each, all at 0.
func virtualGPUs(t *testing.T, preset string, replicas, users int) (*engine.Cluster, *gpuMonitor) {
	t.Helper()
	cfg := *presetConfig(t, preset)
	cfg.Replicas = replicas
	c, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := newGPUMonitor(c.Config(), replicas)
	if m == nil {
		t.Fatalf("%s: no GPU model", preset)
	}
	for u := range users {
		prompt := make([]int, 2000)
		for i := range prompt {
			prompt[i] = u*10000 + i
		}
		c.Submit(&engine.Request{Prompt: prompt, Output: 300})
	}
	return c, m
}

// TestGPUModelVirtual checks the GPU model on the virtual clock, where it
// is exact: readings at a time do not depend on how often the cluster was
// read before; the power gauge over a window is the energy counter's
// increase over it; utilization rises under load and is exactly zero, at
// idle power, a window after the work ends; memory held is flat.
func TestGPUModelVirtual(t *testing.T) {
	// The same load read every 7 ms and every 450 ms: equal readings at
	// the times both read.
	c1, m1 := virtualGPUs(t, "llama-3.1-8b-h100", 2, 24)
	c2, m2 := virtualGPUs(t, "llama-3.1-8b-h100", 2, 24)
	var at2 []time.Duration
	for v := 450 * time.Millisecond; v <= 6*time.Second; v += 450 * time.Millisecond {
		at2 = append(at2, v)
	}
	readings := map[time.Duration][]gpuReading{}
	next := at2
	for v := 7 * time.Millisecond; v <= 6*time.Second; v += 7 * time.Millisecond {
		for len(next) > 0 && next[0] <= v {
			advanceCluster(c1, m1, next[0], nil)
			readings[next[0]] = m1.read(c1)
			next = next[1:]
		}
		advanceCluster(c1, m1, v, nil)
		m1.read(c1)
	}
	busy := false
	for _, w := range at2 {
		advanceCluster(c2, m2, w, nil)
		got, want := m2.read(c2), readings[w]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("at %v, read rarely:\n%+v\nread often:\n%+v", w, got, want)
		}
		if got[0].util > 0.5 {
			busy = true
		}
	}
	if !busy {
		t.Error("utilization never above 50% under a load of 12 users per GPU")
	}

	// Power over a window is Δenergy ÷ Δt: read at two grid times a
	// window apart. The counter's mJ rounding is the only error.
	c, m := virtualGPUs(t, "llama-3.1-8b-h100", 1, 16)
	advanceCluster(c, m, 1200*time.Millisecond, nil)
	e1 := m.read(c)[0].energyMJ
	advanceCluster(c, m, 2200*time.Millisecond, nil)
	r := m.read(c)[0]
	if mean := float64(r.energyMJ-e1) / 1e3; math.Abs(mean-r.powerW) > 2e-3 {
		t.Errorf("Δenergy ÷ Δt over the window is %.4f W, the power gauge %.4f W", mean, r.powerW)
	}
	gpu := c.Config().GPU
	if r.util <= 0 || r.powerW <= gpu.IdleWatts || r.powerW > gpu.TDPWatts {
		t.Errorf("under load: utilization %v, power %v W (idle %v, TDP %v)", r.util, r.powerW, gpu.IdleWatts, gpu.TDPWatts)
	}
	if r.smMHz != int64(gpu.MaxSMClockMHz) || r.memMHz != int64(gpu.MemClockMHz) {
		t.Errorf("busy clocks SM %d, memory %d MHz", r.smMHz, r.memMHz)
	}
	if r.tempC <= tempIdleC {
		t.Errorf("temperature %d °C under load, not above idle %v", r.tempC, tempIdleC)
	}

	// Run the work out (through the monitor, which must see every grid
	// time), then a window more: idle.
	for {
		at, ok := c.Next()
		if !ok {
			break
		}
		advanceCluster(c, m, at, nil)
	}
	done := c.Now()
	hot := m.read(c)[0].tempC
	advanceCluster(c, m, done+1100*time.Millisecond, nil)
	idle := m.read(c)[0]
	if idle.util != 0 || idle.memUtil != 0 || idle.tensor != 0 || idle.powerW != gpu.IdleWatts || idle.smMHz != int64(gpu.IdleSMClockMHz) {
		t.Errorf("a window after the last step: %+v, want utilizations 0, %v W, SM %v MHz", idle, gpu.IdleWatts, gpu.IdleSMClockMHz)
	}
	advanceCluster(c, m, done+gpuTau, nil)
	if cooled := m.read(c)[0].tempC; cooled >= hot {
		t.Errorf("temperature %d °C a time constant into idle, not below %d at the end of the work", cooled, hot)
	}
	// An hour idle: the idle power integrates exactly, and the
	// temperature settles.
	advanceCluster(c, m, done+time.Hour+1100*time.Millisecond, nil)
	later := m.read(c)[0]
	if d := float64(later.energyMJ-idle.energyMJ)/1e3 - gpu.IdleWatts*3600; math.Abs(d) > 2e-3 {
		t.Errorf("an idle hour used %.3f J more than idle power", d)
	}
	if later.tempC != int64(tempIdleC) {
		t.Errorf("temperature %d °C after an idle hour, want %v", later.tempC, tempIdleC)
	}

	cfg := c.Config()
	held := cfg.Model.WeightBytes(cfg.Precision) + cfg.ReserveBytes + float64(cfg.KVCapacity())*cfg.Model.KVBytesPerToken(cfg.Precision)
	if want := int64(math.Round(held / (1 << 20))); r.fbUsedMiB != want || later.fbUsedMiB != want {
		t.Errorf("FB used %d MiB under load, %d idle; want weights + reserve + KV pool, %d", r.fbUsedMiB, later.fbUsedMiB, want)
	}
	if want := int64(math.Round((cfg.GPU.MemoryBytes - held) / (1 << 20))); r.fbFreeMiB != want {
		t.Errorf("FB free %d MiB, want %d", r.fbFreeMiB, want)
	}
}

// dcgmLine matches one DCGM sample as the exporter writes it.
var dcgmLine = regexp.MustCompile(`^(DCGM_FI_[A-Z_]+)\{gpu="(\d+)",UUID="(GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",pci_bus_id="00000000:[0-9A-F]{2}:00\.0",device="nvidia(\d+)",modelName="([^"]+)",Hostname="infermatrix-sim"\} (\S+)$`)

// dcgmScrape is one scrape's DCGM samples by metric and gpu label, and
// when it was taken: the server read its GPUs between at and end.
type dcgmScrape struct {
	at, end time.Time
	values  map[string]map[string]float64
	uuids   map[string]string
	model   string
}

func scrapeDCGM(t *testing.T, baseURL string) dcgmScrape {
	t.Helper()
	at := time.Now()
	text := scrape(t, baseURL)
	end := time.Now()
	types, _ := parseExposition(t, text)
	s := dcgmScrape{at: at, end: end, values: map[string]map[string]float64{}, uuids: map[string]string{}}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "DCGM_") {
			continue
		}
		m := dcgmLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("DCGM sample not in the exporter's shape: %q", line)
		}
		if m[2] != m[4] {
			t.Errorf("gpu %s on device nvidia%s", m[2], m[4])
		}
		var v float64
		if _, err := fmt.Sscan(m[6], &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if s.values[m[1]] == nil {
			s.values[m[1]] = map[string]float64{}
		}
		s.values[m[1]][m[2]] = v
		s.uuids[m[2]] = m[3]
		s.model = m[5]
	}
	for name, kind := range map[string]string{
		"DCGM_FI_DEV_SM_CLOCK": "gauge", "DCGM_FI_DEV_MEM_CLOCK": "gauge", "DCGM_FI_DEV_GPU_TEMP": "gauge",
		"DCGM_FI_DEV_POWER_USAGE": "gauge", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
		"DCGM_FI_DEV_GPU_UTIL": "gauge", "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
		"DCGM_FI_DEV_FB_FREE": "gauge", "DCGM_FI_DEV_FB_USED": "gauge",
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge", "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
	} {
		if types[name] != kind {
			t.Errorf("%s has type %q, want %s", name, types[name], kind)
		}
	}
	return s
}

// loadStreams sends n concurrent streaming completions of tokens tokens
// each and waits for them all.
func loadStreams(t *testing.T, baseURL string, n, tokens int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"prompt":"Request %d tells a long story about the sea.","max_tokens":%d,"stream":true}`, i, tokens)
			resp, err := http.Post(baseURL+"/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("status %s, read: %v", resp.Status, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestGPUMetricsOverHTTP loads an engine preset with two replicas over
// loopback and reads its GPUs as a telemetry client would: both GPUs
// reported with the exporter's labels; utilization above zero under load
// and back to zero after; the energy counter monotonic, and its increase
// over an idle stretch the idle power; FB used flat at weights, reserve
// and KV pool; queue times observed for every request.
func TestGPUMetricsOverHTTP(t *testing.T) {
	cfg := engineConfig(t)
	cfg.Engine.Replicas = 2
	inst := startSim(t, cfg)
	gpu := cfg.Engine.GPU

	before := scrapeDCGM(t, inst.BaseURL)
	if len(before.uuids) != 2 || before.uuids["0"] == before.uuids["1"] {
		t.Fatalf("GPUs %v, want two distinct", before.uuids)
	}
	if before.model != gpu.DeviceName {
		t.Errorf("modelName %q, want %q", before.model, gpu.DeviceName)
	}

	const requests = 24
	done := make(chan struct{})
	var scrapes []dcgmScrape
	go func() {
		defer close(done)
		loadStreams(t, inst.BaseURL, requests, 250)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	for loading := true; loading; {
		select {
		case <-done:
			loading = false
		case <-tick.C:
			scrapes = append(scrapes, scrapeDCGM(t, inst.BaseURL))
		}
	}
	tick.Stop()
	peak := 0.0
	for _, s := range scrapes {
		for _, u := range s.values["DCGM_FI_DEV_GPU_UTIL"] {
			peak = max(peak, u)
		}
	}
	if peak == 0 {
		t.Errorf("GPU utilization 0 in all %d scrapes under load", len(scrapes))
	}

	// Back to idle: within a window (1.1 s) of the last step. The ratio
	// has six decimals where the percentage rounds.
	deadline := time.Now().Add(5 * time.Second)
	var idle dcgmScrape
	for {
		idle = scrapeDCGM(t, inst.BaseURL)
		if u := idle.values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]; u["0"] == 0 && u["1"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("utilization still %v 5 s after the load", idle.values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	if u := idle.values["DCGM_FI_DEV_GPU_UTIL"]; u["0"] != 0 || u["1"] != 0 {
		t.Errorf("GPU utilization %v%% with the engine idle", u)
	}
	time.Sleep(500 * time.Millisecond)
	after := scrapeDCGM(t, inst.BaseURL)

	all := append(append([]dcgmScrape{before}, scrapes...), idle, after)
	for i := 1; i < len(all); i++ {
		for g, e := range all[i].values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] {
			if prev := all[i-1].values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][g]; e < prev {
				t.Fatalf("GPU %s energy went from %v to %v mJ", g, prev, e)
			}
		}
	}
	for _, g := range []string{"0", "1"} {
		// Over the whole run, the mean power lies between idle and TDP,
		// above idle for the work done.
		dt := after.at.Sub(before.at).Seconds()
		mean := (after.values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][g] - before.values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][g]) / 1e3 / dt
		if mean <= gpu.IdleWatts || mean > gpu.TDPWatts {
			t.Errorf("GPU %s: mean power %.1f W over the run, want within (%v, %v]", g, mean, gpu.IdleWatts, gpu.TDPWatts)
		}
		// Over the idle stretch, Δenergy ÷ Δt is the idle power, which
		// the gauge shows too. The server read its GPUs somewhere
		// within each scrape's round trip, so Δt lies between the
		// innermost and the outermost bounds of the two.
		de := (after.values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][g] - idle.values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][g]) / 1e3
		lo, hi := de/after.end.Sub(idle.at).Seconds(), de/after.at.Sub(idle.end).Seconds()
		if gpu.IdleWatts < 0.999*lo-1e-3 || gpu.IdleWatts > 1.001*hi+1e-3 {
			t.Errorf("GPU %s: Δenergy ÷ Δt over the idle stretch is between %.3f and %.3f W, want the idle %v W", g, lo, hi, gpu.IdleWatts)
		}
		if p := idle.values["DCGM_FI_DEV_POWER_USAGE"][g]; math.Abs(p-gpu.IdleWatts) > 1e-3 {
			t.Errorf("GPU %s: power %v W at idle, want %v", g, p, gpu.IdleWatts)
		}
		// FB used is the memory held, flat under load.
		held := cfg.Engine.Model.WeightBytes(cfg.Engine.Precision) + cfg.Engine.ReserveBytes +
			float64(cfg.Engine.KVCapacity())*cfg.Engine.Model.KVBytesPerToken(cfg.Engine.Precision)
		want := math.Round(held / (1 << 20))
		for _, s := range all {
			if got := s.values["DCGM_FI_DEV_FB_USED"][g]; got != want {
				t.Fatalf("GPU %s: FB used %v MiB, want weights + reserve + KV pool = %v", g, got, want)
			}
		}
	}

	_, samples := parseExposition(t, scrape(t, inst.BaseURL))
	if _, _, count, _ := histogramOf(samples, "vllm:request_queue_time_seconds"); count != requests {
		t.Errorf("queue time observed for %v requests, want %d", count, requests)
	}
}

// TestGPUMetricsInstant checks the tiny-fast preset: its steps take no
// time, so its GPUs idle whatever the load.
func TestGPUMetricsInstant(t *testing.T) {
	inst := startSim(t, Config{Engine: presetConfig(t, "tiny-fast")})
	loadStreams(t, inst.BaseURL, 8, 50)
	s := scrapeDCGM(t, inst.BaseURL)
	gpu := presetConfig(t, "tiny-fast").GPU
	if u, p := s.values["DCGM_FI_DEV_GPU_UTIL"]["0"], s.values["DCGM_FI_DEV_POWER_USAGE"]["0"]; u != 0 || p != gpu.IdleWatts {
		t.Errorf("tiny-fast: utilization %v%%, power %v W; want 0 and the idle %v", u, p, gpu.IdleWatts)
	}
}

// TestGPUMetricsAbsentWithoutEngine checks the fixed preset: no engine,
// no GPU and no queue, so no DCGM metrics and no queue-time histogram,
// rather than zeros a client would take for an idle GPU.
func TestGPUMetricsAbsentWithoutEngine(t *testing.T) {
	inst := startSim(t, Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	loadStreams(t, inst.BaseURL, 2, 5)
	text := scrape(t, inst.BaseURL)
	if strings.Contains(text, "DCGM_") || strings.Contains(text, "vllm:request_queue_time_seconds") {
		t.Errorf("the fixed preset serves GPU or queue-time metrics:\n%s", text)
	}
}

// TestVersion checks GET /version, which answers as vLLM's does.
func TestVersion(t *testing.T) {
	inst := startSim(t, Config{})
	base := strings.TrimSuffix(inst.BaseURL, "/v1")
	resp, err := http.Get(base + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || body["version"] == "" || len(body) != 1 {
		t.Errorf("GET /version: %s, %s, %v", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	post, err := http.Post(base+"/version", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /version: %s, want 405", post.Status)
	}
}
