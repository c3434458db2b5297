package runner

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Soak benchmark settings: how long the row dispatches (a Go duration, 60s
// unless set) and at what rate (requests a second, 1,000 unless set).
const (
	soakEnv     = "INFERMATRIX_BENCH_SOAK"
	soakRateEnv = "INFERMATRIX_BENCH_SOAK_RATE"
)

// BenchmarkSoak runs one open-loop row at a fixed rate for a bounded time
// against internal/cheapsse in another process, sampling this process's
// resident memory (VmRSS) and live Go heap every few seconds, and prints
// the series. A client whose memory does not grow with a row's length
// ends where it started: end − start within a few MB, whatever the
// duration. start is taken a fifth of the way in, once the row's
// buffers and connections are up. A rate the machine cannot sustain grows
// memory for another reason, the requests in flight piling up: check
// that requests ≈ rate × duration.
func BenchmarkSoak(b *testing.B) {
	dur := 60 * time.Second
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s: %v", soakEnv, err)
		}
		dur = d
	}
	rate := 1000.0
	if v := os.Getenv(soakRateEnv); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("%s: %v", soakRateEnv, err)
		}
		rate = r
	}
	url, _ := serverProcess(b, cheapServer, "")
	every := max(dur/30, time.Second)
	for b.Loop() {
		var mu sync.Mutex
		var series []memSample
		stop := make(chan struct{})
		done := make(chan struct{})
		begin := time.Now()
		go func() {
			defer close(done)
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					s := readMemory(time.Since(begin))
					mu.Lock()
					series = append(series, s)
					mu.Unlock()
				}
			}
		}()
		rs := runRowAgainst(b, url, fmt.Sprintf(`{id: soak, duration: %s, rate: {per_second: %g}, input_tokens: 16, output_tokens: 32, body: {ignore_eos: true}}`, dur, rate))
		close(stop)
		<-done
		if len(series) < 3 {
			b.Fatalf("%d memory samples; run for longer (%s)", len(series), soakEnv)
		}
		for _, s := range series {
			fmt.Printf("soak %6.1fs  rss %7.1f MB  heap %7.1f MB\n", s.at.Seconds(), s.rssMB, s.heapMB)
		}
		start := series[len(series)/5]
		end := series[len(series)-1]
		peak := 0.0
		for _, s := range series {
			peak = max(peak, s.rssMB)
		}
		b.ReportMetric(start.rssMB, "start-rss-MB")
		b.ReportMetric(end.rssMB, "end-rss-MB")
		b.ReportMetric(peak, "peak-rss-MB")
		b.ReportMetric(end.rssMB-start.rssMB, "growth-rss-MB")
		b.ReportMetric((end.rssMB-start.rssMB)/(end.at-start.at).Minutes(), "growth-rss-MB/min")
		b.ReportMetric(end.heapMB-start.heapMB, "growth-heap-MB")
		b.ReportMetric(float64(rs.Requests.Completed), "requests")
		b.ReportMetric(float64(rs.Metrics.ITL.Count), "itl-samples")
	}
}

type memSample struct {
	at            time.Duration
	rssMB, heapMB float64
}

// readMemory reads the process's resident set (Linux's VmRSS; 0
// elsewhere) and the Go heap's live bytes as of the last collection.
func readMemory(at time.Duration) memSample {
	s := memSample{at: at}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := bytes.Fields(sc.Bytes()); len(f) >= 2 && string(f[0]) == "VmRSS:" {
				kb, _ := strconv.ParseFloat(string(f[1]), 64)
				s.rssMB = kb / 1024
			}
		}
	}
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() == metrics.KindUint64 {
		s.heapMB = float64(m[0].Value.Uint64()) / (1 << 20)
	}
	return s
}
