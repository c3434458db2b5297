package sim

import (
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/infermatrix/infermatrix/sim/engine"
)

// The simulated GPUs: one per engine replica, served on /metrics under the
// names and labels NVIDIA's DCGM exporter writes, so that a client's GPU
// telemetry is exercised without a GPU. docs/simulator.md ("GPU
// telemetry") gives the model and its formulas; in short:
//
//   - The engine accounts, per replica, cumulative busy time (steps in
//     flight), memory time (bytes ÷ peak bandwidth) and compute time
//     (FLOPs ÷ peak FLOP/s) on its virtual clock.
//   - Utilizations are the differences of those over a trailing window of
//     1 to 1.1 s, read from snapshots taken on a fixed 100 ms grid of
//     virtual time, so they do not depend on who scrapes or how often.
//   - Power is idle + (TDP − idle) × activity, activity a fixed blend of
//     the three; energy is its exact integral, so a client's
//     Δenergy ÷ Δt between two scrapes is the mean power between them.
//   - Temperature follows power with a first-order lag.

const (
	// gpuTick is the snapshot grid: the window ends at the scrape and
	// starts at the newest grid time at least gpuWindow before it.
	gpuTick   = 100 * time.Millisecond
	gpuWindow = time.Second
	// gpuRing is how many snapshots are kept: enough to reach gpuWindow
	// back from any time, with room to spare.
	gpuRing = 16

	// Activity blend: a step in flight draws a quarter of the span
	// between idle and TDP for being busy at all, plus up to a quarter
	// for its memory traffic and up to a half for its tensor work, each
	// relative to the most the engine's efficiencies let it reach.
	gpuWeightBusy    = 0.25
	gpuWeightMemory  = 0.25
	gpuWeightCompute = 0.5

	// Temperature: steady state tempIdleC at idle power and tempTDPC at
	// TDP, linear between, approached with time constant gpuTau.
	tempIdleC = 32.0
	tempTDPC  = 78.0
	gpuTau    = 20 * time.Second

	// gpuHostname is the Hostname label, as the exporter reports its
	// node's name.
	gpuHostname = "infermatrix-sim"
)

// gpuSnap is one GPU's cumulative accounting at a grid time, and its
// temperature then.
type gpuSnap struct {
	at                 time.Duration
	busy, mem, compute time.Duration
	tempC              float64
}

// gpuMonitor models the GPUs of one engine cluster. It is guarded by the
// engine's lock (engineTiming.mu): it reads the cluster, and it is
// advanced with it (advanceCluster).
type gpuMonitor struct {
	gpus int
	// Model constants.
	idleW, spanW       float64 // idle power; TDP − idle
	etaBW, etaF        float64 // the engine's efficiencies, which cap memory and compute intensity
	smMax, smIdle, mem float64 // clocks, MHz
	totalBytes         float64 // device memory, the catalogue's figure
	labels             []string

	next  time.Duration // the next grid time to snapshot
	ring  []gpuSnap     // gpuRing rows of gpus snapshots, row-major
	head  int           // the newest row
	count int           // rows filled
	buf   []engine.ReplicaStats
}

// newGPUMonitor returns the GPU model for an engine configuration, or nil
// when its GPU has no telemetry figures (see roofline.GPU.HasTelemetry):
// such a server serves no GPU metrics. The cluster must be at virtual time
// zero, as a new one is.
func newGPUMonitor(cfg engine.Config, gpus int) *gpuMonitor {
	g := cfg.GPU
	if !g.HasTelemetry() || gpus < 1 {
		return nil
	}
	m := &gpuMonitor{
		gpus:  gpus,
		idleW: g.IdleWatts, spanW: g.TDPWatts - g.IdleWatts,
		etaBW: cfg.Efficiency.Bandwidth, etaF: cfg.Efficiency.FLOPs,
		smMax: g.MaxSMClockMHz, smIdle: g.IdleSMClockMHz, mem: g.MemClockMHz,
		totalBytes: g.MemoryBytes,
		next:       gpuTick,
		ring:       make([]gpuSnap, gpuRing*gpus),
		count:      1,
		buf:        make([]engine.ReplicaStats, 0, gpus),
	}
	if m.smIdle <= 0 {
		m.smIdle = m.smMax
	}
	// An instant engine runs no steps; its efficiencies may be unset.
	if m.etaBW <= 0 {
		m.etaBW = 1
	}
	if m.etaF <= 0 {
		m.etaF = 1
	}
	for i := range gpus {
		m.ring[i] = gpuSnap{tempC: tempIdleC}
		m.labels = append(m.labels, dcgmLabels(i, gpuUUID(cfg.Seed, g.Name, i), g.DeviceName))
	}
	return m
}

// dcgmLabels is one GPU's label set in the exporter's order: gpu, UUID,
// pci_bus_id, device, modelName, Hostname.
func dcgmLabels(i int, uuid, model string) string {
	return `gpu="` + strconv.Itoa(i) + `",UUID="` + uuid + `",pci_bus_id="` + pciBusID(i) +
		`",device="nvidia` + strconv.Itoa(i) + `",modelName="` + escapeLabel(model) + `",Hostname="` + gpuHostname + `"`
}

// pciBusID is a plausible bus id for GPU i, in NVML's format.
func pciBusID(i int) string {
	const hex = "0123456789ABCDEF"
	bus := (0x18 + 0x11*i) & 0xff
	return "00000000:" + string([]byte{hex[bus>>4], hex[bus&0xf]}) + ":00.0"
}

// gpuUUID is a deterministic UUID-shaped id for GPU i of a deployment:
// equal seeds and GPUs give equal ids, so that runs against the same
// configuration report the same devices.
func gpuUUID(seed uint64, gpu string, i int) string {
	var b [16]byte
	for half := range 2 {
		h := fnv.New64a()
		var k [8]byte
		for j := range 8 {
			k[j] = byte(seed >> (8 * j))
		}
		h.Write(k[:])
		h.Write([]byte(gpu))
		h.Write([]byte{byte(i), byte(i >> 8), byte(half)})
		v := h.Sum64()
		for j := range 8 {
			b[half*8+j] = byte(v >> (8 * j))
		}
	}
	const hex = "0123456789abcdef"
	out := []byte("GPU-")
	for j, c := range b {
		if j == 4 || j == 6 || j == 8 || j == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return string(out)
}

// activity is a GPU's blended activity accrued over its busy, memory and
// compute times, in seconds: power above idle is (TDP − idle) × its rate.
func (m *gpuMonitor) activity(busy, mem, compute time.Duration) float64 {
	return gpuWeightBusy*busy.Seconds() + gpuWeightMemory*mem.Seconds()/m.etaBW + gpuWeightCompute*compute.Seconds()/m.etaF
}

// steadyTemp is the temperature a GPU settles at under a constant activity
// rate a (power = idle + span × a).
func steadyTemp(a float64) float64 { return tempIdleC + (tempTDPC-tempIdleC)*a }

// relax moves temperature t toward the steady state of activity rate a over
// d: the first-order lag's exact step for a constant rate.
func relax(t, a float64, d time.Duration) float64 {
	ss := steadyTemp(a)
	return ss + (t-ss)*math.Exp(-d.Seconds()/gpuTau.Seconds())
}

func (m *gpuMonitor) row(k int) []gpuSnap { return m.ring[k*m.gpus : (k+1)*m.gpus] }

// observe snapshots the cluster, which must be at the grid time m.next,
// and moves the grid on.
func (m *gpuMonitor) observe(c *engine.Cluster) {
	m.buf = c.ReplicaStats(m.buf[:0])
	prev := m.row(m.head)
	m.head = (m.head + 1) % gpuRing
	m.count = min(m.count+1, gpuRing)
	now := c.Now()
	for i, r := range m.buf {
		p := prev[i]
		d := now - p.at
		a := 0.0
		if d > 0 {
			a = m.activity(r.Busy-p.busy, r.MemoryTime-p.mem, r.ComputeTime-p.compute) / d.Seconds()
		}
		m.row(m.head)[i] = gpuSnap{at: now, busy: r.Busy, mem: r.MemoryTime, compute: r.ComputeTime, tempC: relax(p.tempC, a, d)}
	}
	m.next = now + gpuTick
}

// skip moves the grid past a stretch in which nothing happens: when the
// next event (or the time advanced to) is limit and more grid times than
// the ring holds lie before it, the older ones would be overwritten unread.
// The cluster's state is constant until limit, so the first snapshot after
// the jump covers the stretch exactly.
func (m *gpuMonitor) skip(limit time.Duration) {
	if limit-m.next <= gpuRing*gpuTick {
		return
	}
	last := limit / gpuTick * gpuTick
	m.next = last - (gpuRing-1)*gpuTick
}

// advanceCluster processes every event of c due by v, in order, calling
// stepped with each event's time, and moves c to v. With a monitor it
// stops the cluster at each grid time on the way for a snapshot: no event
// lies between the last one processed and the grid time, so the snapshot
// is exact whoever advances the cluster and whenever.
func advanceCluster(c *engine.Cluster, m *gpuMonitor, v time.Duration, stepped func(at time.Duration)) {
	for {
		at, ok := c.Next()
		if m != nil && m.next <= v && (!ok || at > m.next) {
			limit := v
			if ok {
				limit = min(limit, at)
			}
			m.skip(limit)
			c.RunUntil(m.next)
			m.observe(c)
			continue
		}
		if !ok || at > v {
			break
		}
		c.Step()
		if stepped != nil {
			stepped(at)
		}
	}
	c.RunUntil(v)
}

// gpuReading is one GPU's figures at a scrape, in DCGM's units.
type gpuReading struct {
	labels string
	// Fractions of the window, 0..1.
	util, memUtil, tensor float64
	powerW                float64
	energyMJ              int64
	fbUsedMiB, fbFreeMiB  int64
	smMHz, memMHz         int64
	tempC                 int64
}

// read returns each GPU's figures at the cluster's current time, over the
// trailing window. The cluster must have been advanced with the monitor
// (advanceCluster) to its current time.
func (m *gpuMonitor) read(c *engine.Cluster) []gpuReading {
	now := c.Now()
	m.buf = c.ReplicaStats(m.buf[:0])
	// The window's start: the newest snapshot at least gpuWindow old, or
	// the oldest kept (the server's start, on a server younger than
	// that).
	start := (m.head - m.count + 1 + gpuRing) % gpuRing
	for j := range m.count {
		k := (m.head - j + gpuRing) % gpuRing
		if m.row(k)[0].at <= now-gpuWindow {
			start = k
			break
		}
	}
	from, last := m.row(start), m.row(m.head)
	out := make([]gpuReading, len(m.buf))
	const mib = 1 << 20
	for i, r := range m.buf {
		s := from[i]
		var u, mu, cu, a float64
		if d := (now - s.at).Seconds(); d > 0 {
			u = (r.Busy - s.busy).Seconds() / d
			mu = (r.MemoryTime - s.mem).Seconds() / d
			cu = (r.ComputeTime - s.compute).Seconds() / d
			a = m.activity(r.Busy-s.busy, r.MemoryTime-s.mem, r.ComputeTime-s.compute) / d
		}
		// Temperature: from the newest snapshot, relaxed over the
		// time since under the activity since.
		l := last[i]
		temp := l.tempC
		if d := now - l.at; d > 0 {
			temp = relax(temp, m.activity(r.Busy-l.busy, r.MemoryTime-l.mem, r.ComputeTime-l.compute)/d.Seconds(), d)
		}
		sm := m.smIdle
		if u > 0 {
			sm = m.smMax
		}
		energyJ := m.idleW*now.Seconds() + m.spanW*m.activity(r.Busy, r.MemoryTime, r.ComputeTime)
		out[i] = gpuReading{
			labels: m.labels[i],
			util:   u, memUtil: mu, tensor: cu,
			powerW:    m.idleW + m.spanW*a,
			energyMJ:  int64(math.Floor(energyJ * 1e3)),
			fbUsedMiB: int64(math.Round(r.MemoryBytes / mib)),
			fbFreeMiB: int64(math.Round(max(m.totalBytes-r.MemoryBytes, 0) / mib)),
			smMHz:     int64(math.Round(sm)),
			memMHz:    int64(math.Round(m.mem)),
			tempC:     int64(math.Round(temp)),
		}
	}
	return out
}

// appendDCGM writes the GPUs' figures as DCGM exporter does with its
// default counters (etc/default-counters.csv): its field names, HELP texts
// and types, its label set, integers for its integer fields and six
// decimals for its floating-point ones.
func appendDCGM(b []byte, gpus []gpuReading) []byte {
	if len(gpus) == 0 {
		return b
	}
	ints := func(name, kind, help string, v func(g *gpuReading) int64) {
		b = appendMeta(b, name, kind, help)
		for i := range gpus {
			b = appendDCGMLine(b, name, gpus[i].labels)
			b = strconv.AppendInt(b, v(&gpus[i]), 10)
			b = append(b, '\n')
		}
	}
	floats := func(name, help string, v func(g *gpuReading) float64) {
		b = appendMeta(b, name, "gauge", help)
		for i := range gpus {
			b = appendDCGMLine(b, name, gpus[i].labels)
			b = strconv.AppendFloat(b, v(&gpus[i]), 'f', 6, 64)
			b = append(b, '\n')
		}
	}
	pct := func(f float64) int64 { return int64(math.Round(100 * f)) }
	ints("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", func(g *gpuReading) int64 { return g.smMHz })
	ints("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", func(g *gpuReading) int64 { return g.memMHz })
	ints("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", func(g *gpuReading) int64 { return g.tempC })
	floats("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", func(g *gpuReading) float64 { return g.powerW })
	ints("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
		func(g *gpuReading) int64 { return g.energyMJ })
	ints("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", func(g *gpuReading) int64 { return pct(g.util) })
	ints("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", func(g *gpuReading) int64 { return pct(g.memUtil) })
	ints("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", func(g *gpuReading) int64 { return g.fbFreeMiB })
	ints("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", func(g *gpuReading) int64 { return g.fbUsedMiB })
	floats("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", func(g *gpuReading) float64 { return g.util })
	floats("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", func(g *gpuReading) float64 { return g.tensor })
	floats("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.",
		func(g *gpuReading) float64 { return g.memUtil })
	return b
}

func appendDCGMLine(b []byte, name, labels string) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, labels...)
	return append(b, "} "...)
}
