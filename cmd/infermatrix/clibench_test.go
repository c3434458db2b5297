package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/internal/cheapsse"
	"github.com/infermatrix/infermatrix/metrics"
)

// cheapEnv makes the test binary serve internal/cheapsse instead of
// running tests (TestMain): the server of the CLI benchmark, in a process
// of its own.
const cheapEnv = "INFERMATRIX_TEST_CHEAPSSE"

// cheapProcess starts cheapsse.Serve in another process (the test binary
// again, see TestMain) and returns its URL.
func cheapProcess(tb testing.TB) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), cheapEnv+"=1")
	cmd.Stderr = os.Stderr
	url, stop, err := cheapsse.StartProcess(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = stop() })
	return url
}

// builtCLI builds this package into a temporary directory, once, and
// returns the binary's path. The CLI benchmarks time the binary a user
// runs rather than this test binary, which also carries the tests'
// packages (a JSON Schema validator among them): their initialisers and
// pages cost every start some milliseconds, on a run of about a second.
// removeBuiltCLI (TestMain) deletes it.
var builtCLI = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "infermatrix-bench-")
	if err != nil {
		return "", err
	}
	builtCLIDir = dir
	bin := filepath.Join(dir, "infermatrix")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// builtCLIDir is where builtCLI put the binary, if it was asked to.
var builtCLIDir string

func removeBuiltCLI() {
	if builtCLIDir != "" {
		_ = os.RemoveAll(builtCLIDir)
	}
}

// BenchmarkCLIThroughput measures the CLI end to end: `infermatrix run`
// in a process of its own (records written, summaries, every report),
// against internal/cheapsse in another, beside the raw drain client on
// the same server in the same run. cli-tok/s is the row's output tokens/s
// as its summary gives it; ratio is that ÷ the drain's. wall-tok/s counts
// the CLI's whole wall time, start-up and reports included. The goal is a
// ratio of at least 0.7 at c=64 and c=256 (issue 16).
func BenchmarkCLIThroughput(b *testing.B) {
	for _, users := range []int{64, 256} {
		b.Run(fmt.Sprintf("c=%d", users), func(b *testing.B) {
			url := cheapProcess(b)
			const out = 256
			requests := 16 * users
			dir := b.TempDir()
			exp := filepath.Join(dir, "cli.yaml")
			if err := os.WriteFile(exp, fmt.Appendf(nil, `apiVersion: infermatrix/v1
name: cli-bench
server: {urls: [%q]}
rows:
  - {id: t, concurrency: %d, requests: %d, input_tokens: 16, output_tokens: %d, body: {ignore_eos: true}}
`, url, users, requests, out), 0o644); err != nil {
				b.Fatal(err)
			}
			var drain, cli, wall float64
			i := 0
			for b.Loop() {
				d, err := cheapsse.DrainThroughput(url, users, requests, out)
				if err != nil {
					b.Fatal(err)
				}
				drain += d
				i++
				run := filepath.Join(dir, fmt.Sprintf("run-%d", i))
				_, took, _ := cliProcess(b, "run", exp, "--out", run, "--progress", "lines")
				var sum metrics.Summary
				raw, err := os.ReadFile(filepath.Join(run, "summary.json"))
				if err != nil {
					b.Fatal(err)
				}
				if err := json.Unmarshal(raw, &sum); err != nil {
					b.Fatal(err)
				}
				rs := sum.Rows[0]
				if rs.Requests.Completed != requests {
					b.Fatalf("%d of %d requests completed", rs.Requests.Completed, requests)
				}
				cli += rs.Throughput.OutputTokensPerS
				wall += float64(requests*out) / took.Seconds()
			}
			n := float64(b.N)
			b.ReportMetric(drain/n, "drain-tok/s")
			b.ReportMetric(cli/n, "cli-tok/s")
			b.ReportMetric(wall/n, "wall-tok/s")
			b.ReportMetric(cli/drain, "ratio")
		})
	}
}

// cliProcess runs an infermatrix command line as a process of its own and
// returns its state, wall time and when it ended; a run that is neither a
// verdict nor inconclusive fails b. The process is the infermatrix binary
// itself (builtCLI), or this test binary (see TestMain) where it cannot be
// built.
func cliProcess(b *testing.B, args ...string) (state *os.ProcessState, took time.Duration, ended time.Time) {
	b.Helper()
	var cmd *exec.Cmd
	if bin, err := builtCLI(); err == nil {
		cmd = exec.Command(bin, args...)
	} else {
		b.Logf("timing this test binary as the CLI: %v", err)
		cmd = exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\x1f"))
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	ended = time.Now()
	if err != nil && cmd.ProcessState.ExitCode() != exitInconclusive {
		b.Fatalf("infermatrix %s: %v\n%s", args[0], err, out)
	}
	return cmd.ProcessState, ended.Sub(start), ended
}
