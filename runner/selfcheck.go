package runner

import (
	"bytes"
	"math"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// schedLatencies is the runtime's histogram of how long goroutines waited,
// runnable, before they ran. A goroutine reading a stream is made runnable
// when its bytes arrive; it stamps the event only once it runs, so this
// wait is how late a stamp can be.
const schedLatencies = "/sched/latencies:seconds"

// loadProbe measures the client's own process around a row: CPU time and
// scheduling delay, read at its start and end so that nothing is added to
// the hot path.
type loadProbe struct {
	wall              time.Time
	cpu               time.Duration
	cpuOK             bool
	hostBusy, hostAll uint64
	sched             []uint64
	timers            *timerProbe
}

func startLoadProbe() *loadProbe {
	p := &loadProbe{wall: time.Now()}
	p.cpu, p.cpuOK = processCPU()
	p.hostBusy, p.hostAll = hostCPU()
	if h := readSchedLatencies(); h != nil {
		p.sched = append([]uint64(nil), h.Counts...)
	}
	p.timers = startTimerProbe(timerProbePeriod)
	return p
}

// stop returns what the probe measured since it started. shared says the
// built-in server ran in this process.
func (p *loadProbe) stop(shared bool) metrics.ClientLoad {
	l := metrics.ClientLoad{
		WallSeconds:       time.Since(p.wall).Seconds(),
		Cores:             runtime.GOMAXPROCS(0),
		ClockResolutionNS: float64(clockResolution()),
		SharedWithServer:  shared,
	}
	l.TimerLatenessP99NS = float64(p.timers.stop())
	if cpu, ok := processCPU(); ok && p.cpuOK {
		l.CPUSeconds = (cpu - p.cpu).Seconds()
	} else {
		l.Cores = 0 // no CPU figure on this platform
	}
	if busy, all := hostCPU(); all > p.hostAll && p.hostAll > 0 {
		l.HostCPU = float64(busy-p.hostBusy) / float64(all-p.hostAll)
	}
	if h := readSchedLatencies(); h != nil && len(p.sched) == len(h.Counts) {
		counts := make([]uint64, len(h.Counts))
		for i := range counts {
			counts[i] = h.Counts[i] - p.sched[i]
		}
		l.SchedDelayP99NS = 1e9 * histogramQuantile(counts, h.Buckets, 0.99)
	}
	return l
}

func readSchedLatencies() *rtmetrics.Float64Histogram {
	s := []rtmetrics.Sample{{Name: schedLatencies}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// histogramQuantile is the upper bound of the bucket holding the q-th
// quantile of counts, where bucket i spans buckets[i] to buckets[i+1]: an
// estimate that errs high, as an error bound should. It is 0 without
// samples.
func histogramQuantile(counts []uint64, buckets []float64, q float64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	target := uint64(math.Ceil(q * float64(total)))
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum >= target {
			if hi := buckets[i+1]; !math.IsInf(hi, 1) {
				return max(hi, 0)
			}
			return max(buckets[i], 0)
		}
	}
	return 0
}

// hostCPU reads the machine's busy and total CPU time from Linux's
// /proc/stat, in clock ticks; zeros elsewhere. Busy is all but idle and
// iowait.
func hostCPU() (busy, all uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, 0
	}
	// user nice system idle iowait irq softirq steal; guest time is
	// already counted in user.
	for i, x := range f[1:9] {
		v, err := strconv.ParseUint(string(x), 10, 64)
		if err != nil {
			return 0, 0
		}
		all += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, all
}

var (
	clockResOnce sync.Once
	clockRes     time.Duration
)

// clockResolution is the smallest step the monotonic clock was seen to
// take, measured once: the granularity of every stamp.
func clockResolution() time.Duration {
	clockResOnce.Do(func() {
		clockRes = time.Duration(math.MaxInt64)
		for range 200 {
			t0 := time.Now()
			for {
				if d := time.Since(t0); d > 0 {
					clockRes = min(clockRes, d)
					break
				}
			}
		}
	})
	return clockRes
}

// timerProbePeriod is how often the timer probe wakes: often enough to
// catch a stall of a few milliseconds, rarely enough to cost nothing
// (500 wakeups a second, a few microseconds each).
const timerProbePeriod = 2 * time.Millisecond

// timerProbe is a goroutine that sleeps on a timer again and again and
// records how late each wakeup came. A wakeup is late when the process
// could not run: its cores were busy with other processes, its threads
// were descheduled, or its own goroutines kept every processor. Those are
// the delays that make the client stamp an event late, and the runtime's
// scheduling histogram sees only the last of them.
type timerProbe struct {
	quit chan struct{}
	done chan struct{}
	// counts is a histogram of lateness in buckets whose bounds grow by
	// 10% from one microsecond (latenessBucket).
	counts [latenessBuckets]uint64
}

const latenessBuckets = 200

// latenessBucket is the bucket of a lateness: 0 below 1 µs, then bucket
// i holds [1.1^(i-1), 1.1^i) µs, up to about 1.9 hours in the last.
func latenessBucket(d time.Duration) int {
	us := float64(d) / 1e3
	if us < 1 {
		return 0
	}
	return min(latenessBuckets-1, 1+int(math.Log(us)/math.Log(1.1)))
}

// latenessUpper is bucket i's upper bound.
func latenessUpper(i int) time.Duration {
	if i == 0 {
		return time.Microsecond
	}
	return time.Duration(math.Pow(1.1, float64(i)) * 1e3)
}

func startTimerProbe(period time.Duration) *timerProbe {
	p := &timerProbe{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTimer(period)
		defer t.Stop()
		want := time.Now().Add(period)
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				// Now, not the channel's value: the delay that matters
				// is until this goroutine ran.
				p.counts[latenessBucket(time.Since(want))]++
				want = time.Now().Add(period)
				t.Reset(period)
			}
		}
	}()
	return p
}

// stop ends the probe and returns the p99 of its wakeups' lateness, as
// the upper bound of the bucket that holds it (an estimate that errs high
// by at most 10%), or 0 without wakeups.
func (p *timerProbe) stop() time.Duration {
	close(p.quit)
	<-p.done
	var total uint64
	for _, c := range p.counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	target := uint64(math.Ceil(0.99 * float64(total)))
	var cum uint64
	for i, c := range p.counts {
		cum += c
		if cum >= target {
			return latenessUpper(i)
		}
	}
	return 0
}
