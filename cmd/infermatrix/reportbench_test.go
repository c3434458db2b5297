//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/rundir"
)

// reportBenchEnv sets the requests of BenchmarkReports' row; unset, a
// small row, so that `make bench` stays short. Issue 16's figure is
// INFERMATRIX_BENCH_REPORT_REQUESTS=1000000.
const reportBenchEnv = "INFERMATRIX_BENCH_REPORT_REQUESTS"

// BenchmarkReports measures what a run's reports cost in memory and time
// as its records grow: one row at concurrency 64 with 2-token outputs
// against internal/cheapsse, every format written (the spreadsheet and
// the AIPerf export hold every request), then `infermatrix report` on the
// same run directory. Both run as processes of their own (the
// infermatrix binary, see cliProcess), so each peak RSS is one process's
// own.
//
// run-peak-MB is the run's peak, the row's own memory included;
// reports-s is the run's time from its manifest's end (the row done) to
// its exit, which is writing the reports; report-s and report-peak-MB are
// `infermatrix report`'s, which also summarises the row again from its
// records. Issue 16's goal for a million requests is a peak under 512 MB
// and reports in 60 s at most.
func BenchmarkReports(b *testing.B) {
	requests := 20_000
	if v := os.Getenv(reportBenchEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number of requests", reportBenchEnv, v)
		}
		requests = n
	}
	url := cheapProcess(b)
	dir := b.TempDir()
	exp := filepath.Join(dir, "reports.yaml")
	if err := os.WriteFile(exp, fmt.Appendf(nil, `apiVersion: infermatrix/v1
name: reports-bench
server: {urls: [%q]}
rows:
  - {id: t, concurrency: 64, requests: %d, input_tokens: 16, output_tokens: 2, body: {ignore_eos: true}}
report:
  formats: [markdown, json, csv, html, xlsx, aiperf]
`, url, requests), 0o644); err != nil {
		b.Fatal(err)
	}
	var runPeak, reportsS, reportPeak, reportS float64
	i := 0
	for b.Loop() {
		i++
		run := filepath.Join(dir, fmt.Sprintf("run-%d", i))
		peak, _, ended := benchProcess(b, "run", exp, "--out", run, "--progress", "lines")
		var man rundir.Manifest
		raw, err := os.ReadFile(filepath.Join(run, rundir.ManifestFile))
		if err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(raw, &man); err != nil {
			b.Fatal(err)
		}
		if man.Ended == nil {
			b.Fatal("the run's manifest has no end")
		}
		runPeak += peak
		reportsS += ended.Sub(*man.Ended).Seconds()
		peak, took, _ := benchProcess(b, "report", run)
		reportPeak += peak
		reportS += took.Seconds()
		if err := os.RemoveAll(run); err != nil { // a million requests are 1.3 GB on disk
			b.Fatal(err)
		}
	}
	n := float64(i)
	b.ReportMetric(float64(requests), "requests")
	b.ReportMetric(runPeak/n, "run-peak-MB")
	b.ReportMetric(reportsS/n, "reports-s")
	b.ReportMetric(reportPeak/n, "report-peak-MB")
	b.ReportMetric(reportS/n, "report-s")
}

// benchProcess runs an infermatrix command line as a process of its own
// (cliProcess) and returns its peak RSS in MB, its wall time and when it
// ended.
func benchProcess(b *testing.B, args ...string) (peakMB float64, took time.Duration, ended time.Time) {
	b.Helper()
	state, took, ended := cliProcess(b, args...)
	ru, ok := state.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no resource usage for the process")
	}
	return float64(ru.Maxrss) / 1024, took, ended // Maxrss is in KiB on Linux
}
