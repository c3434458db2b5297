package metrics

import (
	"math"
	"reflect"
	"slices"
	"strings"
)

// ServerEnv is the server's own account of a row as rules read it:
// "server.kv_cache_usage.max < 0.9", "server.preemptions == 0",
// "server.ttft_gap.p50 < 20". Every figure is over the measured window
// (docs/metrics.md, "Server and GPU telemetry").
//
// A figure the server did not publish, or a row scraped for nothing, is
// NaN here and listed by RowEnv.EmptyMetrics, so that a rule reading it is
// judged as on an empty distribution: it cannot pass on data the run does
// not have. A zero is a zero the server reported.
type ServerEnv struct {
	KVCacheUsage       GaugeEnv      `expr:"kv_cache_usage"`
	NumRequestsRunning GaugeEnv      `expr:"num_requests_running"`
	NumRequestsWaiting GaugeEnv      `expr:"num_requests_waiting"`
	PrefixCacheHitRate float64       `expr:"prefix_cache_hit_rate"`
	PrefixCacheQueries float64       `expr:"prefix_cache_queries"`
	PrefixCacheHits    float64       `expr:"prefix_cache_hits"`
	Preemptions        float64       `expr:"preemptions"`
	PromptTokens       float64       `expr:"prompt_tokens"`
	GenerationTokens   float64       `expr:"generation_tokens"`
	TTFT               ServerDistEnv `expr:"ttft"`
	TPOT               ServerDistEnv `expr:"tpot"`
	ITL                ServerDistEnv `expr:"itl"`
	E2E                ServerDistEnv `expr:"e2e"`
	QueueTime          ServerDistEnv `expr:"queue_time"`
	TTFTGap            GapEnv        `expr:"ttft_gap"`
	TPOTGap            GapEnv        `expr:"tpot_gap"`
	// TokensMismatch is the server's token counters disagreeing with the
	// records (CounterCheck.Mismatch). A bool cannot be NaN: when neither
	// counter could be compared, missing lists it, and Filled sets it to
	// false at −∞ and true at +∞, so a rule's verdict on it depends on
	// the missing data exactly when it reads it.
	TokensMismatch bool `expr:"tokens_mismatch"`

	// missing holds the expression names, below server, of the figures
	// the row lacks; all is set when the row has no server telemetry.
	missing []string
	all     bool
}

// GPUEnv is the GPUs' account of a row as rules read it: "gpu.utilization.mean
// > 0.5", "gpu.memory_used_gb.max < 75". Missing figures are NaN, as in
// ServerEnv.
type GPUEnv struct {
	Utilization        GaugeEnv `expr:"utilization"`
	MemCopyUtilization GaugeEnv `expr:"mem_copy_utilization"`
	PowerW             GaugeEnv `expr:"power_w"`
	EnergyJ            float64  `expr:"energy_j"`
	MemoryUsedGB       GaugeEnv `expr:"memory_used_gb"`
	SMClockMHz         GaugeEnv `expr:"sm_clock_mhz"`
	TemperatureC       GaugeEnv `expr:"temperature_c"`
	// GPUs is how many distinct GPUs reported.
	GPUs float64 `expr:"gpus"`

	missing []string
	all     bool
}

// GaugeEnv is a gauge's mean, min and max over the window's scrapes.
type GaugeEnv struct {
	Mean float64 `expr:"mean"`
	Min  float64 `expr:"min"`
	Max  float64 `expr:"max"`
}

// ServerDistEnv is a server-side latency histogram's figures, in ms.
type ServerDistEnv struct {
	Count float64 `expr:"count"`
	Mean  float64 `expr:"mean"`
	P50   float64 `expr:"p50"`
	P90   float64 `expr:"p90"`
	P95   float64 `expr:"p95"`
	P99   float64 `expr:"p99"`
}

// GapEnv is a client figure minus the server's, in ms.
type GapEnv struct {
	Mean float64 `expr:"mean"`
	P50  float64 `expr:"p50"`
	P95  float64 `expr:"p95"`
}

// envBuilder collects a telemetry environment's figures and the names of
// those that are missing.
type envBuilder struct{ missing []string }

func (b *envBuilder) gauge(name string, g *Gauge) GaugeEnv {
	// A gauge no scrape read is missing; a hand-built one without a
	// sample count but with figures is taken as read.
	if g == nil || g.Samples == 0 && g.Mean == 0 && g.Min == 0 && g.Max == 0 || math.IsNaN(g.Mean) {
		b.missing = append(b.missing, name)
		return GaugeEnv{Mean: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	return GaugeEnv{Mean: g.Mean, Min: g.Min, Max: g.Max}
}

func (b *envBuilder) scalar(name string, v *float64) float64 {
	if v == nil || math.IsNaN(*v) {
		b.missing = append(b.missing, name)
		return math.NaN()
	}
	return *v
}

// dist is a histogram's figures. One with no observations in the window
// has a count (zero) and no statistics: they are missing.
func (b *envBuilder) dist(name string, d *ServerDist) ServerDistEnv {
	nan := math.NaN()
	if d == nil {
		b.missing = append(b.missing, name)
		return ServerDistEnv{Count: nan, Mean: nan, P50: nan, P90: nan, P95: nan, P99: nan}
	}
	if d.Count == 0 {
		b.missing = append(b.missing, name)
		return ServerDistEnv{Mean: nan, P50: nan, P90: nan, P95: nan, P99: nan}
	}
	return ServerDistEnv{Count: d.Count, Mean: d.Mean, P50: d.P50, P90: d.P90, P95: d.P95, P99: d.P99}
}

func (b *envBuilder) gap(name string, g *Gap) GapEnv {
	if g == nil {
		b.missing = append(b.missing, name)
		return GapEnv{Mean: math.NaN(), P50: math.NaN(), P95: math.NaN()}
	}
	return GapEnv{Mean: g.Mean, P50: g.P50, P95: g.P95}
}

// newServerEnv builds what rules read of a row's server telemetry; s may
// be nil.
func newServerEnv(s *ServerTelemetry) ServerEnv {
	if s == nil {
		s = &ServerTelemetry{}
		e := newServerEnv(s)
		e.missing, e.all = nil, true
		return e
	}
	var b envBuilder
	e := ServerEnv{
		KVCacheUsage:       b.gauge("kv_cache_usage", s.KVCacheUsage),
		NumRequestsRunning: b.gauge("num_requests_running", s.NumRequestsRunning),
		NumRequestsWaiting: b.gauge("num_requests_waiting", s.NumRequestsWaiting),
		PrefixCacheHitRate: b.scalar("prefix_cache_hit_rate", s.PrefixCacheHitRate),
		PrefixCacheQueries: b.scalar("prefix_cache_queries", s.PrefixCacheQueries),
		PrefixCacheHits:    b.scalar("prefix_cache_hits", s.PrefixCacheHits),
		Preemptions:        b.scalar("preemptions", s.Preemptions),
		PromptTokens:       b.scalar("prompt_tokens", s.PromptTokens),
		GenerationTokens:   b.scalar("generation_tokens", s.GenerationTokens),
		TTFT:               b.dist("ttft", s.TTFT),
		TPOT:               b.dist("tpot", s.TPOT),
		ITL:                b.dist("itl", s.ITL),
		E2E:                b.dist("e2e", s.E2E),
		QueueTime:          b.dist("queue_time", s.QueueTime),
		TTFTGap:            b.gap("ttft_gap", s.TTFTGap),
		TPOTGap:            b.gap("tpot_gap", s.TPOTGap),
	}
	if t := s.Tokens; t != nil && (t.Prompt.Compared || t.Generation.Compared) {
		e.TokensMismatch = t.Mismatch
	} else {
		b.missing = append(b.missing, "tokens_mismatch")
	}
	e.missing = b.missing
	return e
}

// newGPUEnv builds what rules read of a row's GPU telemetry; g may be nil.
func newGPUEnv(g *GPUTelemetry) GPUEnv {
	if g == nil {
		e := newGPUEnv(&GPUTelemetry{})
		e.missing, e.all = nil, true
		return e
	}
	var b envBuilder
	e := GPUEnv{
		Utilization:        b.gauge("utilization", g.Utilization),
		MemCopyUtilization: b.gauge("mem_copy_utilization", g.MemCopyUtilization),
		PowerW:             b.gauge("power_w", g.PowerW),
		EnergyJ:            b.scalar("energy_j", g.EnergyJ),
		MemoryUsedGB:       b.gauge("memory_used_gb", g.MemoryUsedGB),
		SMClockMHz:         b.gauge("sm_clock_mhz", g.SMClockMHz),
		TemperatureC:       b.gauge("temperature_c", g.TemperatureC),
	}
	// No GPU reported in the window: the count is not a measurement of
	// the deployment but of a failed scrape.
	if g.GPUs > 0 && g.Scrapes > 0 {
		e.GPUs = float64(g.GPUs)
	} else {
		e.GPUs = math.NaN()
		b.missing = append(b.missing, "gpus")
	}
	e.missing = b.missing
	return e
}

// emptyNames lists the missing figures under root: root alone when the row
// has no telemetry of that kind, else root.<figure> for each one missing.
func emptyNames(root string, all bool, missing []string) []string {
	if all {
		return []string{root}
	}
	out := make([]string, len(missing))
	for i, m := range missing {
		out[i] = root + "." + m
	}
	return out
}

// filled returns the server environment with every missing figure at v.
func (e ServerEnv) filled(v float64) ServerEnv {
	fillNaN(reflect.ValueOf(&e).Elem(), v)
	if e.all || slices.Contains(e.missing, "tokens_mismatch") {
		e.TokensMismatch = v > 0
	}
	return e
}

// filled returns the GPU environment with every missing figure at v.
func (e GPUEnv) filled(v float64) GPUEnv {
	fillNaN(reflect.ValueOf(&e).Elem(), v)
	return e
}

// fillNaN replaces every NaN float64 in an addressable struct by v.
func fillNaN(rv reflect.Value, v float64) {
	switch rv.Kind() {
	case reflect.Struct:
		for i := 0; i < rv.NumField(); i++ {
			if rv.Type().Field(i).IsExported() {
				fillNaN(rv.Field(i), v)
			}
		}
	case reflect.Float64:
		if math.IsNaN(rv.Float()) {
			rv.SetFloat(v)
		}
	}
}

// MissingName returns the name in empty (a list RowEnv.EmptyMetrics gave)
// that covers the dotted name path, or "" when none does: "ttft" covers
// ttft.p95, "server" covers server.preemptions, and
// "server.kv_cache_usage" covers server.kv_cache_usage.max. Judges use it
// to say which missing figure a clause read.
func MissingName(path string, empty []string) string {
	for _, m := range empty {
		if path == m || strings.HasPrefix(path, m+".") {
			return m
		}
	}
	return ""
}
